package handoff

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// fuzzDecoder checks what every decoder promises of any input: it never
// panics and never modifies its input; it refuses with ErrMalformed; what
// it accepts is in canonical decoded form (invariant 2), passes Check, and
// re-encodes to exactly the input (invariant 1). It is seeded with the
// codec's samples and with random valid values from a fixed seed.
//
// Run each with a cap on minimisation, or the fuzzer can spend most of its
// time minimising new-coverage inputs (golang/go#48820):
//
//	go test -run='^$' -fuzz=FuzzDecodeTransfer -fuzztime=20s -fuzzminimizetime=1s ./handoff/
func fuzzDecoder(f *testing.F, name string) {
	c := codecNamed(f, name)
	for _, m := range c.samples {
		f.Add(m.Append(nil))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		f.Add(c.random(r).Append(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		m, err := c.decode(in)
		if !bytes.Equal(in, orig) {
			t.Fatal("the decoder modified its input")
		}
		if err != nil {
			checkMalformed(t, err)
			return
		}
		if p := emptyNonNil(reflect.ValueOf(m), name); p != "" {
			t.Fatalf("decoded %s is empty but not nil", p)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("accepted %x, but Check refuses it: %v", in, err)
		}
		if out := m.Append(nil); !bytes.Equal(out, in) {
			t.Fatalf("accepted %x but re-encodes as %x", in, out)
		}
	})
}

func FuzzDecodeTransfer(f *testing.F) { fuzzDecoder(f, "Transfer") }
func FuzzDecodeAck(f *testing.F)      { fuzzDecoder(f, "Ack") }
func FuzzDecodeRefuse(f *testing.F)   { fuzzDecoder(f, "Refuse") }
