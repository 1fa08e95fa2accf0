package bench

import (
	"strconv"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	swring "github.com/shardwise/shardwise/hashring"
	swrendezvous "github.com/shardwise/shardwise/rendezvous"
)

// One key set for every benchmark: 1024 keys of the "user:<n>" form, so the
// lookups hit different parts of each structure.
var keys = func() []string {
	k := make([]string, 1024)
	for i := range k {
		k[i] = "user:" + strconv.Itoa(i*7919)
	}
	return k
}()

// Fixtures are built once per node count per process: some libraries take
// seconds to build a 1000-node ring, and -count repeats each benchmark.
type fixture struct {
	nodes     []string
	sha1Ring  *swring.Ring
	fastRing  *swring.Ring
	stathat   func(string) (string, error)
	serialx   func(string) (string, bool)
	groupcach func(string) string
	ours      *swrendezvous.Table
	weighted  *swrendezvous.Table
	dgryski   func(string) string
}

var fixtures sync.Map // node count → func() *fixture

func getFixture(n int) *fixture {
	f, _ := fixtures.LoadOrStore(n, sync.OnceValue(func() *fixture {
		nodes := NodeNames(n)
		ws := make([]swrendezvous.Weighted, n)
		for i, node := range nodes {
			ws[i] = swrendezvous.Weighted{Node: node, Weight: float64(1 + i%4)}
		}
		weighted, err := swrendezvous.NewWeighted(ws)
		if err != nil {
			panic(err)
		}
		return &fixture{
			nodes:     nodes,
			sha1Ring:  NewOurRing(nil, nodes),
			fastRing:  NewOurRing(swring.XXHash, nodes),
			stathat:   NewStathat(nodes).Get,
			serialx:   NewSerialx(nodes).GetNode,
			groupcach: NewGroupcache(nodes).Get,
			ours:      NewOurRendezvous(nodes),
			weighted:  weighted,
			dgryski:   NewDgryski(nodes).Lookup,
		}
	}))
	return f.(func() *fixture)()
}

var (
	sinkS   string
	sinkU32 uint32
)

func nodeRuns(b *testing.B, run func(b *testing.B, f *fixture)) {
	for _, n := range NodeCounts {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			f := getFixture(n)
			run(b, f)
		})
	}
}

// BenchmarkRing times one leader lookup per op. Method values are called
// directly so every library pays the same (one indirect call).
func BenchmarkRing(b *testing.B) {
	b.Run("impl=shardwise-sha1", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS, _ = f.sha1Ring.Get(keys[i&1023])
			})
		})
	})
	b.Run("impl=shardwise-xxhash", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS, _ = f.fastRing.Get(keys[i&1023])
			})
		})
	})
	b.Run("impl=stathat", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS, _ = f.stathat(keys[i&1023])
			})
		})
	})
	b.Run("impl=serialx", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS, _ = f.serialx(keys[i&1023])
			})
		})
	})
	b.Run("impl=groupcache", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS = f.groupcach(keys[i&1023])
			})
		})
	})
	b.Run("impl=jump", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS = f.nodes[JumpIndex(keys[i&1023], len(f.nodes))]
			})
		})
	})
}

// BenchmarkHashOnly times hashing the key alone: the floor under each ring
// lookup ("compatible mode costs at most 1.3× SHA-1 alone").
func BenchmarkHashOnly(b *testing.B) {
	b.Run("impl=sha1-stdlib", func(b *testing.B) {
		loop(b, func(i int) { sha1Alone(keys[i&1023]) })
	})
	b.Run("impl=shardwise-SHA1", func(b *testing.B) {
		loop(b, func(i int) {
			sinkU32 = swring.SHA1(keys[i&1023])
		})
	})
	b.Run("impl=shardwise-XXHash", func(b *testing.B) {
		loop(b, func(i int) {
			sinkU32 = swring.XXHash(keys[i&1023])
		})
	})
}

// BenchmarkRendezvous times one owner lookup per op.
func BenchmarkRendezvous(b *testing.B) {
	b.Run("impl=shardwise-compatible", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS = f.ours.Owner(keys[i&1023])
			})
		})
	})
	b.Run("impl=shardwise-weighted", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS = f.weighted.Owner(keys[i&1023])
			})
		})
	})
	b.Run("impl=dgryski", func(b *testing.B) {
		nodeRuns(b, func(b *testing.B, f *fixture) {
			loop(b, func(i int) {
				sinkS = f.dgryski(keys[i&1023])
			})
		})
	})
}

// TestXXHashMatchesCespare checks hashring.XXHash, written on the standard
// library only, against github.com/cespare/xxhash/v2 at every length that
// exercises a different path (tail bytes, 4- and 8-byte words, 32-byte
// stripes).
func TestXXHashMatchesCespare(t *testing.T) {
	buf := make([]byte, 300)
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	for n := 0; n <= len(buf); n++ {
		s := string(buf[:n])
		if got, want := swring.XXHash(s), uint32(xxhash.Sum64String(s)); got != want {
			t.Fatalf("len %d: XXHash = %#x, cespare low 32 bits = %#x", n, got, want)
		}
	}
}

// TestPlacersAnswerFromTheirNodes keeps the report honest: every
// implementation, built as the report builds it, returns one of its nodes.
func TestPlacersAnswerFromTheirNodes(t *testing.T) {
	nodes := NodeNames(10)
	member := map[string]bool{}
	for _, n := range nodes {
		member[n] = true
	}
	for _, impl := range Impls {
		p := impl.Build(nodes)
		for _, k := range keys[:200] {
			if got := p.Lookup(k); !member[got] {
				t.Fatalf("%s: Lookup(%s) = %q", impl.Name, k, got)
			}
		}
	}
}
