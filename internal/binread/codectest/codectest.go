// Package codectest checks, for tests, what every payload codec built on
// binread promises (package handoff, zone/internal/wire): Append keeps dst
// and decode inverts it exactly; a decoded value is in canonical form (no
// empty non-nil slice) and passes the type's Check, if it has one; and a
// decoder, fed anything, never panics, never modifies its input, refuses
// with its package's error, and re-encodes what it accepts to exactly the
// input. Each package keeps its own samples, generators and error check.
package codectest

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Message is what every payload type implements.
type Message interface{ Append(dst []byte) []byte }

// Codec is one payload type under test: its decoder, hand-made valid
// values in canonical decoded form (empty slices nil), and a generator of
// random valid values in that form.
type Codec[M Message] struct {
	Name    string
	Decode  func([]byte) (M, error)
	Samples []M
	Random  func(*rand.Rand) M
}

// Adapt turns a decoder of a concrete type into one of the interface M.
func Adapt[M Message, T Message](decode func([]byte) (T, error)) func([]byte) (M, error) {
	return func(b []byte) (M, error) {
		var zero M
		m, err := decode(b)
		if err != nil {
			return zero, err
		}
		return any(m).(M), nil
	}
}

// Named returns the codec called name, failing tb if there is none.
func Named[M Message](tb testing.TB, codecs []Codec[M], name string) Codec[M] {
	tb.Helper()
	for _, c := range codecs {
		if c.Name == name {
			return c
		}
	}
	tb.Fatalf("no codec %q", name)
	return Codec[M]{}
}

// check runs m's Check, if its type has one.
func check(m any) error {
	if c, ok := m.(interface{ Check() error }); ok {
		return c.Check()
	}
	return nil
}

// RoundTrip encodes m after a prefix, checks the prefix is kept, decodes
// and compares with m, which must be in canonical form (and pass Check),
// checks that re-encoding gives the same bytes, and returns them.
func RoundTrip[M Message](tb testing.TB, c Codec[M], m M) []byte {
	tb.Helper()
	if err := check(m); err != nil {
		tb.Fatalf("%s: Check of %+v: %v", c.Name, m, err)
	}
	prefix := []byte("prefix")
	b := m.Append(bytes.Clone(prefix))
	if !bytes.HasPrefix(b, prefix) {
		tb.Fatalf("%s: Append overwrote dst", c.Name)
	}
	b = b[len(prefix):]
	got, err := c.Decode(b)
	if err != nil {
		tb.Fatalf("%s: decode(%x) of %+v: %v", c.Name, b, m, err)
	}
	if !reflect.DeepEqual(got, m) {
		tb.Fatalf("%s: decoded %+v, want %+v", c.Name, got, m)
	}
	if p := EmptyNonNil(reflect.ValueOf(got), c.Name); p != "" {
		tb.Fatalf("%s: decoded %s is empty but not nil", c.Name, p)
	}
	if again := got.Append(nil); !bytes.Equal(again, b) {
		tb.Fatalf("%s: re-encoding changed %x to %x", c.Name, b, again)
	}
	return b
}

// Fuzz fuzzes c's decoder, seeded with its samples, eight random values
// from a fixed seed, nothing and the version byte alone. Every refusal
// goes to refused, which checks it is the package's error.
func Fuzz[M Message](f *testing.F, c Codec[M], version byte, refused func(testing.TB, error)) {
	for _, m := range c.Samples {
		f.Add(m.Append(nil))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		f.Add(c.Random(r).Append(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{version})
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		m, err := c.Decode(in)
		if !bytes.Equal(in, orig) {
			t.Fatal("the decoder modified its input")
		}
		if err != nil {
			refused(t, err)
			return
		}
		if p := EmptyNonNil(reflect.ValueOf(m), c.Name); p != "" {
			t.Fatalf("decoded %s is empty but not nil", p)
		}
		if err := check(m); err != nil {
			t.Fatalf("accepted %x, but Check refuses it: %v", in, err)
		}
		if out := m.Append(nil); !bytes.Equal(out, in) {
			t.Fatalf("accepted %x but re-encodes as %x", in, out)
		}
	})
}

// EmptyNonNil returns the path of the first empty non-nil slice in v, or
// "" when v is in canonical decoded form.
func EmptyNonNil(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return EmptyNonNil(v.Elem(), path)
	case reflect.Slice:
		if !v.IsNil() && v.Len() == 0 {
			return path
		}
		// Elements that can hold no slice are not visited one by one: a
		// 64 KiB byte run was 65,536 reflect calls and path strings.
		if !mayHoldSlice(v.Type().Elem()) {
			return ""
		}
		elem := path + "[]"
		for i := range v.Len() {
			if p := EmptyNonNil(v.Index(i), elem); p != "" {
				return p
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if p := EmptyNonNil(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}

// mayHoldSlice reports whether a value of type t can hold a slice that
// EmptyNonNil would visit: it descends interfaces, slices and structs
// only.
func mayHoldSlice(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface, reflect.Slice:
		return true
	case reflect.Struct:
		for i := range t.NumField() {
			if mayHoldSlice(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// Truncations are the prefix lengths a test of a decoder's refusal of a
// cut-off encoding tries on an encoding of n bytes: all of them up to
// wholePrefixes bytes, which covers every sample and nearly every random
// message; past that (the few random messages at a size limit: a list or
// a byte run of many KiB), every prefix within edgePrefixes bytes of
// either end, where the header, the first elements and the last lie, and
// midPrefixes drawn from r between. Every prefix of such a message
// decodes a longer run of the same elements, at O(n) each: all of them
// cost O(n²) and most of a package's test time under -race, for no
// branch the others miss.
func Truncations(r *rand.Rand, n int) []int {
	const wholePrefixes, edgePrefixes, midPrefixes = 2048, 512, 256
	if n <= wholePrefixes {
		ks := make([]int, n)
		for k := range ks {
			ks[k] = k
		}
		return ks
	}
	ks := make([]int, 0, 2*edgePrefixes+midPrefixes)
	for k := range edgePrefixes {
		ks = append(ks, k, n-1-k)
	}
	for range midPrefixes {
		ks = append(ks, edgePrefixes+r.IntN(n-2*edgePrefixes))
	}
	return ks
}
