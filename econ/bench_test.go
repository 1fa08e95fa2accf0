//go:build unix

// The benchmarks read the process's CPU time with getrusage, hence unix.

package econ

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// benchRecordCallers are the concurrency levels of BenchmarkEconRecord
// (scripts/bench-econ reports the same list).
var benchRecordCallers = []int{1, 16, 256}

// benchBuyers is how many funded players the purchases debit.
const benchBuyers = 500

// benchScopeShapes are the two ways BenchmarkEconRecord spreads movements
// over scopes:
//
//   - one: every movement in one scope, so one open session takes them
//     all and its group commit batches the concurrent callers (the store's
//     cheapest case per movement, where the node's and the transport's own
//     costs show most);
//   - player: each movement in its buyer's scope ("player:<id>", the
//     reference game's scoping of wallet changes), 500 of them, so
//     concurrent callers mostly land in different sessions and each
//     movement is close to a transaction of its own.
var benchScopeShapes = []struct {
	name  string
	scope func(i int) string
}{
	{"one", func(int) string { return "market" }},
	{"player", func(i int) string { return "player:" + benchBuyer(i) }},
}

// BenchmarkEconRecord measures durable movements through one economy node
// two ways, side by side on the same node and store:
//
//   - inproc: (*Node).Record called directly;
//   - network: the Go client (econ.Client: routing by the live members, an
//     attempt timeout, retries) over gRPC on loopback to the node's
//     service, served as econ.Host serves it for "shardwise econ", then the
//     same Node.Record.
//
// The node is one econ.Host (registered in the shared embedded etcd, a
// one-member view, default settings: an epoch rotates, and the Record that
// filled it waits for its settle, every 512 movements of a scope) on SQLite
// in a temporary directory and, if PostgreSQL is installed, on a durable
// PostgreSQL started by internal/testenv (skipped loudly otherwise). A
// movement is a purchase (a funded buyer's spendable debited, a seller's
// earned credited) in one scope or in its buyer's (benchScopeShapes), so
// the reservations are checked as in the game.
//
// One case is a store, a scope shape and a number of concurrent callers in
// a closed loop (1, 16, 256). It records b.N movements through each path,
// in benchSlices slices per path run alternately (ABBAABBA…), so that the
// machine's load, which drifts on a shared box, falls on both paths alike.
// It reports, per path, movements/s, the p50 and p99 of one Record's
// latency as its caller saw it (nearest rank over every call), the
// process's CPU time per movement (user+system from getrusage: the client,
// the server and, on SQLite, the store's work, all in this process;
// PostgreSQL's server is another process and not counted) and the heap
// allocations per movement; and the throughput ratio network ÷ in-process.
// ns/op is the whole case's time per b.N and means little.
//
// scripts/bench-econ runs it and writes docs/bench/econ.md.
func BenchmarkEconRecord(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		benchRecordOn(b, "sqlite://"+filepath.Join(b.TempDir(), "econ.db"))
	})
	b.Run("postgres", func(b *testing.B) {
		pg := testenv.StartPostgresWith(b, testenv.PostgresOptions{Durable: true})
		benchRecordOn(b, pg.NewDatabase(b))
	})
}

// benchSlices is how many slices each path's movements of a case are cut
// into (see BenchmarkEconRecord).
const benchSlices = 4

// recordFunc is one path to the node.
type recordFunc func(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error)

// benchRecordOn runs the cases against one Host on the store at storeURL.
func benchRecordOn(b *testing.B, storeURL string) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	fundBenchBuyers(b, ctx, storeURL)
	prefix := testPrefix(b)
	node := startBenchHost(b, prefix, storeURL)
	client := newEconClient(b, newCoord(b, prefix), nil)
	for _, shape := range benchScopeShapes {
		for _, callers := range benchRecordCallers {
			b.Run(fmt.Sprintf("scope=%s/callers=%d", shape.name, callers), func(b *testing.B) {
				benchRecordPaths(b, ctx, callers, shape.scope, node.Record, client.Record)
			})
		}
	}
}

// pathStats accumulates one path's slices.
type pathStats struct {
	movements int
	elapsed   time.Duration
	cpu       time.Duration
	mallocs   uint64
	lat       []time.Duration
}

// benchRecordPaths runs one case (see BenchmarkEconRecord).
func benchRecordPaths(b *testing.B, ctx context.Context, callers int, scope func(int) string, inproc, network recordFunc) {
	paths := []recordFunc{inproc, network}
	stats := make([]pathStats, len(paths))
	perSlice := (b.N + benchSlices - 1) / benchSlices
	b.ResetTimer()
	for k := range 2 * benchSlices {
		// A B B A A B B A: each path runs first as often as second.
		p := (k + k/2) % 2
		benchRecordSlice(b, ctx, callers, perSlice, scope, paths[p], &stats[p])
	}
	b.StopTimer()
	for p, name := range []string{"inproc", "network"} {
		st := &stats[p]
		slices.Sort(st.lat)
		b.ReportMetric(float64(st.movements)/st.elapsed.Seconds(), name+"-movements/s")
		b.ReportMetric(ms(nearestRank(st.lat, 0.50)), name+"-p50-ms")
		b.ReportMetric(ms(nearestRank(st.lat, 0.99)), name+"-p99-ms")
		b.ReportMetric(float64(st.cpu.Microseconds())/float64(st.movements), name+"-cpu-us")
		b.ReportMetric(float64(st.mallocs)/float64(st.movements), name+"-allocs")
	}
	in, net := &stats[0], &stats[1]
	b.ReportMetric((float64(net.movements)/net.elapsed.Seconds())/(float64(in.movements)/in.elapsed.Seconds()), "network/inproc")
}

var benchRecordRun atomic.Int64 // keeps keys unique across slices and runs

// benchRecordSlice records n purchases through record from callers
// goroutines, each recording its next movement as soon as the last
// returned, and adds its time, CPU, allocations and latencies to st.
func benchRecordSlice(b *testing.B, ctx context.Context, callers, n int, scope func(int) string, record recordFunc, st *pathStats) {
	run := benchRecordRun.Add(1)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		mem      runtime.MemStats
	)
	runtime.ReadMemStats(&mem)
	mallocs0 := mem.Mallocs
	cpu0 := processCPU(b)
	t0 := time.Now()
	for range callers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, n/callers+1)
			defer func() {
				mu.Lock()
				st.lat = append(st.lat, mine...)
				mu.Unlock()
			}()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				m := netting.Movement{Key: fmt.Sprintf("r%d-m%d", run, i), Legs: benchPurchase(i)}
				start := time.Now()
				out, err := record(ctx, scope(i), m)
				mine = append(mine, time.Since(start))
				if err == nil && out.Status != netting.Accepted {
					err = fmt.Errorf("movement %s: %+v", m.Key, out)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(n)) // the others stop too
					return
				}
			}
		})
	}
	wg.Wait()
	st.elapsed += time.Since(t0)
	st.cpu += processCPU(b) - cpu0
	runtime.ReadMemStats(&mem)
	st.mallocs += mem.Mallocs - mallocs0
	st.movements += n
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// startBenchHost runs econ.Host on storeURL under prefix until cleanup and
// returns its node once it records.
func startBenchHost(b *testing.B, prefix, storeURL string) *Node {
	b.Helper()
	hostCtx, stop := context.WithCancel(context.Background())
	ready := make(chan HostReady, 1)
	done := make(chan error, 1)
	go func() {
		done <- Host(hostCtx, HostConfig{
			Coord:    coord.ClientConfig{Endpoints: sharedEtcd.Endpoints(), Prefix: prefix, DialTimeout: 5 * time.Second},
			Name:     "econ-bench",
			StoreURL: storeURL,
			Logger:   testLogger(b),
			OnReady:  func(r HostReady) { ready <- r },
		})
	}()
	var r HostReady
	select {
	case r = <-ready:
	case err := <-done:
		stop()
		b.Fatalf("Host: %v", err)
	}
	b.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			b.Errorf("Host: %v", err)
		}
	})
	waitView(b, []string{"econ-bench"}, r.Node)
	return r.Node
}

// fundBenchBuyers credits every buyer enough for any run, in one posting
// written through a store handle of its own (the Host opens another).
func fundBenchBuyers(b *testing.B, ctx context.Context, storeURL string) {
	b.Helper()
	s, err := sqlstore.Open(ctx, storeURL)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	legs := []ledger.Leg{ledger.Debit(ledger.Revenue, benchBuyers<<40)}
	for i := range benchBuyers {
		legs = append(legs, ledger.Credit(ledger.Spendable(benchBuyer(i)), 1<<40))
	}
	if err := s.Post(ctx, ledger.Posting{ID: "fund-buyers", Legs: legs}); err != nil {
		b.Fatal(err)
	}
}

func benchPurchase(i int) []ledger.Leg {
	amount := int64(1 + i%97)
	return []ledger.Leg{
		ledger.Debit(ledger.Spendable(benchBuyer(i)), amount),
		ledger.Credit(ledger.Earned(fmt.Sprintf("seller-%d", (i/benchBuyers+i)%benchBuyers)), amount),
	}
}

// benchBuyer is the buyer of movement i.
func benchBuyer(i int) string { return "buyer-" + strconv.Itoa(i%benchBuyers) }

// nearestRank returns the p-quantile of sorted durations (nearest rank).
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// processCPU is the user+system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
