package game

import (
	"testing"
)

// A purse encodes and decodes back to itself; truncated or padded bytes
// are refused.
func TestDecodePurse(t *testing.T) {
	p := Purse{Coins: -3, Goods: [len(Goods)]int64{0, 7, 1 << 40}}
	b := encodePurse(nil, &p)
	got, err := DecodePurse(b)
	if err != nil || got != p {
		t.Fatalf("%x decodes to %+v, %v; want %+v", b, got, err, p)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, err := DecodePurse(bad); err == nil {
			t.Errorf("%x decodes", bad)
		}
	}
}

// FuzzDecodePurse: the purse decoder never panics, and what it decodes
// encodes to bytes that decode to the same purse.
func FuzzDecodePurse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0x64, 2, 4, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePurse(b)
		if err != nil {
			return
		}
		if again, err := DecodePurse(encodePurse(nil, &p)); err != nil || again != p {
			t.Fatalf("%x decodes to %+v, which re-decodes to %+v, %v", b, p, again, err)
		}
	})
}
