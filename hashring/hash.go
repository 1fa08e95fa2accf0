package hashring

import (
	"crypto/sha1"
	"encoding/binary"
	"math/bits"
)

// HashFunc maps a string onto the ring 0 … 2³²−1. Every process that shares
// a ring must use the same function, or keys land on different nodes.
type HashFunc func(key string) uint32

// stackHashLimit is the longest key SHA1 hashes without allocating. Shorter
// keys are copied into a stack buffer because crypto/sha1 takes a []byte and
// a string-to-slice conversion of a long string would go to the heap.
const stackHashLimit = 256

// SHA1 is the compatible default hash: the first four bytes of the SHA-1
// digest of key's UTF-8 bytes, read big-endian. It is what @shardwise/core
// uses, so a Go ring and a TypeScript ring with the same nodes agree on every
// key. It does not allocate for keys up to 256 bytes.
func SHA1(key string) uint32 {
	var sum [sha1.Size]byte
	switch {
	case len(key) <= 32:
		// The compiler gives a non-escaping conversion a 32-byte stack buffer.
		sum = sha1.Sum([]byte(key))
	case len(key) <= stackHashLimit:
		var buf [stackHashLimit]byte
		n := copy(buf[:], key)
		sum = sha1.Sum(buf[:n])
	default:
		sum = sha1.Sum([]byte(key))
	}
	return binary.BigEndian.Uint32(sum[:4])
}

// XXHash is the fast, non-compatible hash: the low 32 bits of XXH64 (seed 0)
// of key's bytes. It is several times cheaper than SHA1 for short keys and
// never allocates, but a ring built with it places keys differently from the
// TypeScript ring. Choose it only when every process sharing the ring is Go.
func XXHash(key string) uint32 { return uint32(xxh64(key)) }

// XXH64 constants, from the xxHash specification.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

// xxh64 is XXH64 with seed 0 over the bytes of s. It reads the string in
// place (no conversion to []byte) so it never allocates.
func xxh64(s string) uint64 {
	n := len(s)
	var h uint64
	i := 0
	if n >= 32 {
		// prime1+prime2 and -prime1, both modulo 2⁶⁴.
		v1 := uint64(6983438078262162902)
		v2 := xxPrime2
		v3 := uint64(0)
		v4 := uint64(7046029288634856825)
		for ; i+32 <= n; i += 32 {
			v1 = xxRound(v1, le64(s, i))
			v2 = xxRound(v2, le64(s, i+8))
			v3 = xxRound(v3, le64(s, i+16))
			v4 = xxRound(v4, le64(s, i+24))
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) +
			bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(h, v1)
		h = xxMerge(h, v2)
		h = xxMerge(h, v3)
		h = xxMerge(h, v4)
	} else {
		h = xxPrime5
	}
	h += uint64(n)
	for ; i+8 <= n; i += 8 {
		h ^= xxRound(0, le64(s, i))
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
	}
	if i+4 <= n {
		h ^= uint64(le32(s, i)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		i += 4
	}
	for ; i < n; i++ {
		h ^= uint64(s[i]) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

func xxRound(acc, lane uint64) uint64 {
	acc += lane * xxPrime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * xxPrime1
}

func xxMerge(acc, v uint64) uint64 {
	acc ^= xxRound(0, v)
	return acc*xxPrime1 + xxPrime4
}

// le64 and le32 read little-endian words out of a string; the compiler
// merges the byte loads into one load.
func le64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string, i int) uint32 {
	s = s[i : i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
