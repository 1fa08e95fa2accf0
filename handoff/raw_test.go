package handoff

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/shardwise/shardwise/internal/testseed"
)

// rawAgrees checks AppendRawSnapshots against DecodeTransfer on b: the
// same verdict and error; on success one RawSnapshot per snapshot, whose
// entity and epoch are the snapshot's, whose bytes are its encoding and
// decode back to it, and whose Component finds each component's data.
func rawAgrees(t *testing.T, b []byte) {
	t.Helper()
	prefix := []RawSnapshot{{Entity: 7}}
	raws, rerr := AppendRawSnapshots(prefix, b)
	m, derr := DecodeTransfer(b)
	if (rerr == nil) != (derr == nil) || rerr != nil && rerr.Error() != derr.Error() {
		t.Fatalf("AppendRawSnapshots: %v; DecodeTransfer: %v", rerr, derr)
	}
	if len(raws) < 1 || raws[0].Entity != 7 {
		t.Fatalf("dst's elements lost: %+v", raws)
	}
	raws = raws[1:]
	if derr != nil {
		if len(raws) != 0 {
			t.Fatalf("refused, yet appended %d", len(raws))
		}
		return
	}
	if len(raws) != len(m.Entities) {
		t.Fatalf("%d raw snapshots, %d decoded", len(raws), len(m.Entities))
	}
	for i, s := range m.Entities {
		raw := raws[i]
		if raw.Entity != s.Entity || raw.Epoch != s.Epoch || !bytes.Equal(raw.Bytes, s.Append(nil)) || cap(raw.Bytes) != len(raw.Bytes) {
			t.Fatalf("snapshot %d: raw %d/%d %x (cap %d), decoded %+v encodes as %x", i, raw.Entity, raw.Epoch, raw.Bytes, cap(raw.Bytes), s, s.Append(nil))
		}
		got, err := raw.Decode()
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("snapshot %d: Decode = %+v, %v, want %+v", i, got, err, s)
		}
		for _, c := range s.Components {
			if d, ok := raw.Component(c.Name); !ok || !bytes.Equal(d, c.Data) || (d == nil) != (c.Data == nil) {
				t.Fatalf("snapshot %d: Component(%q) = %x, %v, want %x", i, c.Name, d, ok, c.Data)
			}
		}
		if _, ok := raw.Component("no such component"); ok {
			t.Fatalf("snapshot %d: Component finds a name it does not have", i)
		}
	}
}

func TestRawSnapshotsAgreeWithTheDecoder(t *testing.T) {
	c := codecNamed(t, "Transfer")
	for _, m := range c.Samples {
		rawAgrees(t, m.Append(nil))
	}
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x5A17))
	for range 500 {
		b := c.Random(r).Append(nil)
		rawAgrees(t, b)
		// Every truncation and a flipped byte: refused or accepted alike.
		rawAgrees(t, b[:r.IntN(len(b))])
		bad := bytes.Clone(b)
		bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
		rawAgrees(t, bad)
	}
}

// FuzzRawSnapshots: whatever the bytes, AppendRawSnapshots and
// DecodeTransfer agree.
func FuzzRawSnapshots(f *testing.F) {
	for _, m := range codecNamed(f, "Transfer").Samples {
		f.Add(m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) { rawAgrees(t, b) })
}

// A standby checks every checkpoint it holds: AppendRawSnapshots
// allocates nothing per snapshot (dst has room): checking 500 snapshots
// allocates what checking one does (the reader and the names it reads).
func TestRawSnapshotsAllocateNothingPerSnapshot(t *testing.T) {
	allocs := func(n int) float64 {
		var m Transfer
		for i := range n {
			s := player()
			s.Entity += uint64(i)
			m.Entities = append(m.Entities, s)
		}
		b := m.Append(nil)
		dst := make([]RawSnapshot, 0, n)
		return testing.AllocsPerRun(20, func() {
			var err error
			if dst, err = AppendRawSnapshots(dst[:0], b); err != nil {
				t.Fatal(err)
			}
		})
	}
	if one, many := allocs(1), allocs(500); many != one {
		t.Fatalf("checking 500 snapshots allocates %v times, one %v", many, one)
	}
}
