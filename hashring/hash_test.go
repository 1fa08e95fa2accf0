package hashring

import (
	"crypto/sha1"
	"encoding/binary"
	"strings"
	"testing"
)

// Reference values of the hash that the TypeScript ring (@shardwise/core)
// produces for the same strings.
func TestSHA1ReferenceValues(t *testing.T) {
	cases := []struct {
		in   string
		want uint32
	}{
		{"", 3661210606},
		{"k", 335271836},
		{"x", 301378958},
		{"a", 2264392759},
		{"key:0", 764055514},
		{"h:1-0", 4180438123},
	}
	for _, c := range cases {
		if got := SHA1(c.in); got != c.want {
			t.Errorf("SHA1(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// SHA1 copies keys into different buffers by length; every path must agree
// with the plain definition, including at the 32- and 256-byte edges.
func TestSHA1AllLengths(t *testing.T) {
	for n := 0; n <= 600; n++ {
		key := strings.Repeat("é", n/2) + strings.Repeat("z", n%2)
		sum := sha1.Sum([]byte(key))
		if got, want := SHA1(key), binary.BigEndian.Uint32(sum[:4]); got != want {
			t.Fatalf("len %d: SHA1 = %d, want %d", len(key), got, want)
		}
	}
}

// Published XXH64 (seed 0) digests; XXHash is their low 32 bits. The bench
// module also checks XXHash against github.com/cespare/xxhash/v2 at every
// length up to 300 bytes.
func TestXXHashKnownDigests(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
	}
	for _, c := range cases {
		if got := xxh64(c.in); got != c.want {
			t.Errorf("xxh64(%q) = %#x, want %#x", c.in, got, c.want)
		}
		if got := XXHash(c.in); got != uint32(c.want) {
			t.Errorf("XXHash(%q) = %#x, want %#x", c.in, got, uint32(c.want))
		}
	}
}

func TestHashesDoNotAllocate(t *testing.T) {
	for _, n := range []int{0, 8, 32, 33, 200, 256} {
		key := strings.Repeat("q", n)
		if a := testing.AllocsPerRun(100, func() { _ = SHA1(key) }); a != 0 {
			t.Errorf("SHA1 of %d bytes: %v allocs", n, a)
		}
		if a := testing.AllocsPerRun(100, func() { _ = XXHash(key) }); a != 0 {
			t.Errorf("XXHash of %d bytes: %v allocs", n, a)
		}
	}
}
