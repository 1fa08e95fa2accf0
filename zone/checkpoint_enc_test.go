package zone

import (
	"bytes"
	"hash/maphash"
	"testing"

	"github.com/shardwise/shardwise/handoff"
)

// The delta's hash counts everything of a snapshot but its table version
// and the time it was taken, read from its encoding in the body.
func TestCheckpointHashIgnoresOnlyTableAndTime(t *testing.T) {
	snap := func(epoch, table uint64, a, at, z string) handoff.Snapshot {
		comps := []handoff.Component{{Name: "a", Data: []byte(a)}, {Name: atName, Data: []byte(at)}, {Name: "zz", Data: []byte(z)}}
		for i := range comps {
			if len(comps[i].Data) == 0 {
				comps[i].Data = nil
			}
		}
		return handoff.Snapshot{Entity: 1 << 60, Epoch: epoch, Table: table, Components: comps}
	}
	seed := maphash.MakeSeed()
	var e ckptEnc
	e.add(snap(1, 1, "x", "00000000", "y")) // one before: hashLast reads the last
	hash := func(s handoff.Snapshot) uint64 {
		before := bytes.Clone(e.body)
		e.add(s)
		h := e.hashLast(seed, s)
		e.dropLast()
		if !bytes.Equal(e.body, before) || len(e.cuts) != 1 {
			t.Fatal("dropLast left the body changed")
		}
		return h
	}
	base := hash(snap(3, 5, "xy", "00000000", "z"))
	for _, c := range []struct {
		name string
		s    handoff.Snapshot
		same bool
	}{
		{"another time", snap(3, 5, "xy", "99999999", "z"), true},
		{"another table", snap(3, 500, "xy", "00000000", "z"), true},
		{"another epoch", snap(300, 5, "xy", "00000000", "z"), false},
		{"the first component", snap(3, 5, "xz", "00000000", "z"), false},
		{"the last component", snap(3, 5, "xy", "00000000", "w"), false},
		{"data moved between components", snap(3, 5, "x", "00000000", "yz"), false},
		{"a component fewer", handoff.Snapshot{Entity: 1 << 60, Epoch: 3, Table: 5, Components: []handoff.Component{{Name: "a", Data: []byte("xy")}, {Name: atName, Data: []byte("00000000")}}}, false},
	} {
		if got := hash(c.s) == base; got != c.same {
			t.Errorf("%s: same hash %v, want %v", c.name, got, c.same)
		}
	}
}
