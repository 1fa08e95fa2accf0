package wire

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkForward encodes and decodes a Forward of 64 frames for 32
// accounts, about one gateway's share of a tick.
func BenchmarkForward(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	m := randForward(r, 64, 32)
	for i := range m.Frames {
		m.Frames[i] = make([]byte, 40+r.IntN(80))
	}
	for i := range m.Accounts {
		m.Accounts[i].Frames = m.Accounts[i].Frames[:0]
		for range 16 {
			m.Accounts[i].Frames = append(m.Accounts[i].Frames, uint32(r.IntN(64)))
		}
	}
	buf := m.Append(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = m.Append(buf[:0])
		if _, err := DecodeForward(buf); err != nil {
			b.Fatal(err)
		}
	}
}
