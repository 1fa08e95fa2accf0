package handoff

import "testing"

// BenchmarkPlayerAndPet encodes and decodes the Transfer of a player with
// its pet (the package doc's goal: at most 2 KiB). It reports the payload
// size as bytes/transfer.
func BenchmarkPlayerAndPet(b *testing.B) {
	m := Transfer{Entities: []Snapshot{player(), pet()}}
	buf := m.Append(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(len(buf)), "bytes/transfer")
	b.ReportAllocs()
	for b.Loop() {
		buf = m.Append(buf[:0])
		if _, err := DecodeTransfer(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewSnapshot builds and checks the player's snapshot from its
// component set, as a source does for each entity it hands over.
func BenchmarkNewSnapshot(b *testing.B) {
	p := player()
	comps := make(map[string][]byte, len(p.Components))
	for _, c := range p.Components {
		comps[c.Name] = c.Data
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewSnapshot(p.Entity, p.Epoch, p.Table, comps); err != nil {
			b.Fatal(err)
		}
	}
}
