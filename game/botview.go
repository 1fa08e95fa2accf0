package game

import (
	"encoding/binary"

	"github.com/shardwise/shardwise/zone"
)

// DecodePurse reads a Purse payload (WirePurse), as a client in Go needs
// to see what its player can spend. Known is not on the wire: a decoded
// purse leaves it false.
func DecodePurse(b []byte) (Purse, error) {
	var p Purse
	fields := [1 + len(Goods)]*int64{&p.Coins}
	for i := range p.Goods {
		fields[1+i] = &p.Goods[i]
	}
	for _, f := range fields {
		x, n := binary.Varint(b)
		if n <= 0 {
			return Purse{}, zone.ErrMalformedState.Wrap("purse truncated")
		}
		*f, b = x, b[n:]
	}
	if len(b) != 0 {
		return Purse{}, zone.ErrMalformedState.Wrap("purse with %d trailing bytes", len(b))
	}
	return p, nil
}
