package sqlstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// benchAccounts is the number of buyers and of sellers (so 2×benchAccounts
// wallet accounts are touched).
const benchAccounts = 500

type benchStore struct {
	name string
	open func(b *testing.B) *sqlstore.Store
	// url gives a new empty database (PostgreSQL only).
	url func(b *testing.B) string
}

// benchStores are SQLite in a temp dir and a durable (fsync on) PostgreSQL
// started once for the calling benchmark.
func benchStores(b *testing.B) []benchStore {
	pg := testenv.StartPostgresWith(b, testenv.PostgresOptions{Durable: true})
	return []benchStore{
		{"sqlite", func(b *testing.B) *sqlstore.Store { return openSQLite(b) }, nil},
		{"postgres", func(b *testing.B) *sqlstore.Store { return openPostgres(b, pg) }, func(b *testing.B) string { return pg.NewDatabase(b) }},
	}
}

// unchainedStore opens the same stores at schema 5, the last before the
// ledger's hash chain: they post as the stores did before it (no head to
// lock, no hash), the baseline the session's ratio was first measured
// against (docs/decisions.md, "Cost, measured").
func unchainedStore(b *testing.B, st benchStore) *sqlstore.Store {
	b.Helper()
	ctx := testCtx(b)
	var s *sqlstore.Store
	var err error
	switch st.name {
	case "sqlite":
		s, err = sqlstore.OpenSQLiteAtVersion(ctx, filepath.Join(b.TempDir(), "unchained.db"), 5)
	default:
		s, err = sqlstore.OpenPostgresAtVersion(ctx, st.url(b), 5)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchCallers are the concurrency levels of the throughput benchmark
// (scripts/bench-netting reports the same list).
var benchCallers = []int{16, 64, 256, 1024}

// BenchmarkNettingThroughput measures, side by side in one run, on SQLite
// and on a durable PostgreSQL, durable movements per second through one
// netting session (Record returns once its journal row committed) against
// the baseline: the same movements, each posted as its own ledger
// transaction on the same store. Both get the same number of concurrent
// callers — a busy node serves many players at once, and group commit is
// what turns concurrent callers into one journal transaction — at several
// levels of concurrency. The session also reports movements/commit: how
// many Records its group commits carried on average. Every case reports
// cpu-us/movement, the CPU time of this process (user + system) per
// movement: on a shared machine it moves less than the rate does (a
// PostgreSQL server's own CPU is in its processes, not counted).
//
// At the largest caller count more cases run beside them: HotSeller, the
// session with every credit to one seller (one hot counter); Zipf, buyers
// and sellers each drawn from 10,000 wallets by a Zipf law of s = 1.1 (a
// few wallets in most movements, a long tail); and BaselineUnchained, the
// baseline on a store at schema 5, before postings were hash-chained.
// Every session case reports p99-ms, the 99th percentile of one Record's
// latency (call to return, the commit's fsync included).
//
// The baseline posts at most baselineMovements of the b.N movements: its
// rate is one transaction per movement whatever their number (10,000 are
// 10,000 commits, where a session's 100,000 are about 120), and at about
// 1,300 a second a full 100,000 would take a minute and a half per case.
//
// scripts/bench-netting runs it and writes docs/bench/netting.md.
func BenchmarkNettingThroughput(b *testing.B) {
	for _, st := range benchStores(b) {
		for _, callers := range benchCallers {
			prefix := fmt.Sprintf("%s/callers=%d/", st.name, callers)
			b.Run(prefix+"Session", func(b *testing.B) { benchSession(b, st.open(b), callers, purchaseLegs) })
			if callers == benchCallers[len(benchCallers)-1] {
				b.Run(prefix+"HotSeller", func(b *testing.B) { benchSession(b, st.open(b), callers, hotSellerLegs) })
				b.Run(prefix+"Zipf", func(b *testing.B) {
					s := st.open(b)
					fundWallets(b, s, zipfWallets)
					benchSession(b, s, callers, zipfLegs(b.N))
				})
			}
			b.Run(prefix+"Baseline", func(b *testing.B) { benchBaseline(b, st.open(b), callers) })
			if callers == benchCallers[len(benchCallers)-1] {
				b.Run(prefix+"BaselineUnchained", func(b *testing.B) { benchBaseline(b, unchainedStore(b, st), callers) })
			}
		}
	}
}

// BenchmarkNettingSettle times settling one session of 10,000 movements over
// 1,000 accounts and reports the postings written per 1,000 movements.
func BenchmarkNettingSettle(b *testing.B) {
	for _, st := range benchStores(b) {
		b.Run(st.name, func(b *testing.B) { benchSettle(b, st.open(b)) })
	}
}

func benchNode(b *testing.B, s *sqlstore.Store) *netting.ClusterNode {
	b.Helper()
	return benchNodeOn(b, s)
}

func benchNodeOn(b *testing.B, s netting.SharedStore) *netting.ClusterNode {
	b.Helper()
	n, err := netting.OpenClusterNode(s, netting.ClusterConfig{
		NodeID: "bench", Nodes: []string{"bench"},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

// zipfWallets is the number of buyers, and of sellers, of the Zipf case.
const zipfWallets = 10_000

// fundBuyers gives every buyer of the uniform cases enough credits for any
// benchmark run, in one posting.
func fundBuyers(b *testing.B, s *sqlstore.Store) {
	b.Helper()
	legs := []ledger.Leg{ledger.Debit(ledger.Revenue, benchAccounts<<40)}
	for i := range benchAccounts {
		legs = append(legs, ledger.Credit(ledger.Spendable(fmt.Sprintf("buyer-%d", i)), 1<<40))
	}
	if err := s.Post(testCtx(b), ledger.Posting{ID: "fund-buyers", Legs: legs}); err != nil {
		b.Fatal(err)
	}
}

// fundWallets gives buyers 0 … n-1 enough credits for any benchmark run
// (the Zipf case's; beside fundBuyers', which benchSession posts), in postings of at most 1,000 buyers (a statement of SQLite binds at most
// 32,766 values).
func fundWallets(b *testing.B, s *sqlstore.Store, n int) {
	b.Helper()
	for first := 0; first < n; first += 1_000 {
		last := min(first+1_000, n)
		legs := []ledger.Leg{ledger.Debit(ledger.Revenue, int64(last-first)<<40)}
		for i := first; i < last; i++ {
			legs = append(legs, ledger.Credit(ledger.Spendable(fmt.Sprintf("buyer-%d", i)), 1<<40))
		}
		if err := s.Post(testCtx(b), ledger.Posting{ID: fmt.Sprintf("fund-wallets-%d", first), Legs: legs}); err != nil {
			b.Fatal(err)
		}
	}
}

// hotSellerLegs are purchaseLegs with every credit to one seller.
func hotSellerLegs(i int) []ledger.Leg {
	amount := int64(1 + i%97)
	return []ledger.Leg{
		ledger.Debit(ledger.Spendable(fmt.Sprintf("buyer-%d", i%benchAccounts)), amount),
		ledger.Credit(ledger.Earned("seller-hot"), amount),
	}
}

// zipfLegs returns n purchases whose buyers and sellers are drawn, each
// from zipfWallets wallets, by a Zipf law of s = 1.1 (from a fixed seed:
// every run draws the same load).
func zipfLegs(n int) func(i int) []ledger.Leg {
	r := rand.New(rand.NewSource(1))
	buyers := rand.NewZipf(r, 1.1, 1, zipfWallets-1)
	sellers := rand.NewZipf(r, 1.1, 1, zipfWallets-1)
	type pair struct{ buyer, seller uint64 }
	draws := make([]pair, n)
	for i := range draws {
		draws[i] = pair{buyers.Uint64(), sellers.Uint64()}
	}
	return func(i int) []ledger.Leg {
		amount := int64(1 + i%97)
		return []ledger.Leg{
			ledger.Debit(ledger.Spendable(fmt.Sprintf("buyer-%d", draws[i].buyer)), amount),
			ledger.Credit(ledger.Earned(fmt.Sprintf("seller-%d", draws[i].seller)), amount),
		}
	}
}

func purchaseLegs(i int) []ledger.Leg {
	amount := int64(1 + i%97)
	return []ledger.Leg{
		ledger.Debit(ledger.Spendable(fmt.Sprintf("buyer-%d", i%benchAccounts)), amount),
		ledger.Credit(ledger.Earned(fmt.Sprintf("seller-%d", (i/benchAccounts+i)%benchAccounts)), amount),
	}
}

// runCallers runs n calls of fn over callers goroutines.
func runCallers(b *testing.B, callers, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		b.Fatal(err)
	}
}

var benchRun atomic.Int64 // keeps keys unique across a benchmark's repeated runs

// countingStore counts the group commits (ReserveAndAppend calls) of the
// sessions on it; everything else is the store's own.
type countingStore struct {
	*sqlstore.Store
	commits atomic.Int64
}

func (c *countingStore) ReserveAndAppend(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func([]bool) []netting.JournalRecord) ([]bool, error) {
	return c.ReserveAndRecord(ctx, own, reqs, netting.AppendOnly(build))
}

func (c *countingStore) ReserveAndRecord(ctx context.Context, own map[string]int64, reqs [][]ledger.AccountDelta, build func([]bool) ([]netting.JournalRecord, []netting.RefusedKey)) ([]bool, error) {
	c.commits.Add(1)
	return c.Store.ReserveAndRecord(ctx, own, reqs, build)
}

func benchSession(b *testing.B, s *sqlstore.Store, callers int, legs func(i int) []ledger.Leg) {
	ctx := testCtx(b)
	fundBuyers(b, s)
	counted := &countingStore{Store: s}
	node := benchNodeOn(b, counted)
	sess, err := node.OpenSession(ctx, "bench-scope")
	if err != nil {
		b.Fatal(err)
	}
	run := benchRun.Add(1)
	latency := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	runCallers(b, callers, b.N, func(i int) error {
		m := netting.Movement{Key: fmt.Sprintf("r%d-m%d", run, i), Legs: legs(i)}
		start := time.Now()
		out, err := sess.Record(ctx, m)
		latency[i] = time.Since(start)
		if err == nil && out.Status != netting.Accepted {
			err = fmt.Errorf("movement %d: %+v", i, out)
		}
		return err
	})
	b.StopTimer()
	slices.Sort(latency)
	b.ReportMetric(float64(latency[len(latency)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-us/movement")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "movements/s")
	if n := counted.commits.Load(); n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "movements/commit")
	}
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// baselineMovements is the most movements a baseline case posts (see
// BenchmarkNettingThroughput).
const baselineMovements = 10_000

func benchBaseline(b *testing.B, s *sqlstore.Store, callers int) {
	ctx := testCtx(b)
	fundBuyers(b, s)
	run := benchRun.Add(1)
	n := min(b.N, baselineMovements)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	runCallers(b, callers, n, func(i int) error {
		return s.Post(ctx, ledger.Posting{ID: fmt.Sprintf("r%d-p%d", run, i), Legs: purchaseLegs(i)})
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(n), "cpu-us/movement")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "movements/s")
}

// benchSettle times Settle of a session holding settleMovements movements
// between benchAccounts buyers and benchAccounts sellers. Recording them is
// setup, outside the timer.
func benchSettle(b *testing.B, s *sqlstore.Store) {
	const settleMovements = 10_000
	ctx := testCtx(b)
	fundBuyers(b, s)
	node := benchNode(b, s)
	var postings, movements int
	var settling time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sess, err := node.OpenSession(ctx, "settle-scope")
		if err != nil {
			b.Fatal(err)
		}
		run := benchRun.Add(1)
		runCallers(b, 64, settleMovements, func(i int) error {
			_, err := sess.Record(ctx, netting.Movement{Key: fmt.Sprintf("s%d-m%d", run, i), Legs: purchaseLegs(i)})
			return err
		})
		b.StartTimer()
		start := time.Now()
		rep, err := sess.Settle(ctx)
		if err != nil {
			b.Fatal(err)
		}
		settling += time.Since(start)
		if rep.Mode != netting.ModeNetted || rep.Netted != settleMovements {
			b.Fatalf("settle report %+v", rep)
		}
		postings += rep.Postings
		movements += rep.Netted
	}
	b.ReportMetric(float64(settling.Milliseconds())/float64(b.N), "settle-ms")
	b.ReportMetric(1000*float64(postings)/float64(movements), "postings/1k-movements")
}

// BenchmarkNettingSettleMillion times settling one session of 1,000,000
// movements over 10,000 accounts (5,000 buyers paying 5,000 sellers), at
// the default chunk width (16: 625 postings) and a wide one (1,024: 10
// postings). The journal and its reservations are written straight through
// the store as setup (ReserveAndAppend in batches of 4,096 rows), not
// through Record: recording is what BenchmarkNettingThroughput measures.
// The timer covers Settle on the recovered session — read the journal
// back, verify its chain, net, post the chunks, release, finish. Two of
// its parts are then timed again on their own, on the same rows: the read
// (read-ms, ReadJournal) and the chain check (verify-ms, VerifyChain);
// each also as this process's CPU time (…-cpu-ms; a PostgreSQL server's
// is not in it).
func BenchmarkNettingSettleMillion(b *testing.B) {
	const movements, buyers = 1_000_000, 5_000
	legs := func(i int) []ledger.Leg {
		amount := int64(1 + i%97)
		return []ledger.Leg{
			ledger.Debit(ledger.Spendable(fmt.Sprintf("buyer-%d", i%buyers)), amount),
			ledger.Credit(ledger.Earned(fmt.Sprintf("seller-%d", (i/buyers+i)%buyers)), amount),
		}
	}
	for _, st := range benchStores(b) {
		for _, width := range []int{netting.DefaultChunkWidth, 1024} {
			b.Run(fmt.Sprintf("%s/width=%d", st.name, width), func(b *testing.B) {
				// Writing a million rows outlasts testCtx on a loaded machine.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
				defer cancel()
				s := st.open(b)
				fund := []ledger.Leg{ledger.Debit(ledger.Revenue, buyers<<40)}
				for i := range buyers {
					fund = append(fund, ledger.Credit(ledger.Spendable(fmt.Sprintf("buyer-%d", i)), 1<<40))
				}
				if err := s.Post(ctx, ledger.Posting{ID: "fund-buyers", Legs: fund}); err != nil {
					b.Fatal(err)
				}
				node := benchNode(b, s)
				var settling, reading, verifying, settleCPU, readCPU, verifyCPU time.Duration
				var postings int
				for range b.N {
					b.StopTimer()
					id := fmt.Sprintf("million-%d", benchRun.Add(1))
					if _, err := s.CreateSession(ctx, netting.SessionMeta{ID: id, Scope: "settle-scope", NodeID: "bench", ChunkWidth: width}); err != nil {
						b.Fatal(err)
					}
					head := netting.GenesisHash
					for start := 0; start < movements; start += 4096 {
						n := min(4096, movements-start)
						reqs := make([][]ledger.AccountDelta, n)
						recs := make([]netting.JournalRecord, n)
						for k := range n {
							i := start + k
							l := legs(i)
							reqs[k] = ledger.NetDeltas(l)
							key := fmt.Sprintf("%s-m%d", id, i)
							h := netting.ChainHash(head, key, l)
							recs[k] = netting.JournalRecord{SessionID: id, Seq: int64(i), Key: key, Legs: l, PrevHash: head, Hash: h}
							head = h
						}
						granted, err := s.ReserveAndAppend(ctx, nil, reqs, func([]bool) []netting.JournalRecord { return recs })
						if err != nil {
							b.Fatal(err)
						}
						for _, g := range granted {
							if !g {
								b.Fatal("a setup reservation was refused")
							}
						}
					}
					sess, err := node.Recover(ctx, id)
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start, cpu := time.Now(), processCPU()
					rep, err := sess.Settle(ctx)
					settling, settleCPU = settling+time.Since(start), settleCPU+processCPU()-cpu
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if rep.Mode != netting.ModeNetted || rep.Netted != movements {
						b.Fatalf("settle report %+v", rep)
					}
					postings += rep.Postings
					start, cpu = time.Now(), processCPU()
					recs, err := s.ReadJournal(ctx, id)
					reading, readCPU = reading+time.Since(start), readCPU+processCPU()-cpu
					if err != nil || len(recs) != movements {
						b.Fatalf("read back %d rows, %v", len(recs), err)
					}
					start, cpu = time.Now(), processCPU()
					if _, err := netting.VerifyChain(id, recs); err != nil {
						b.Fatal(err)
					}
					verifying, verifyCPU = verifying+time.Since(start), verifyCPU+processCPU()-cpu
					b.StartTimer()
				}
				b.ReportMetric(float64(settling.Milliseconds())/float64(b.N), "settle-ms")
				b.ReportMetric(float64(reading.Milliseconds())/float64(b.N), "read-ms")
				b.ReportMetric(float64(verifying.Milliseconds())/float64(b.N), "verify-ms")
				b.ReportMetric(float64(postings)/float64(b.N), "postings")
				// This process's CPU in each: on a shared machine the wall
				// times above stretch with the load, these less.
				b.ReportMetric(float64(settleCPU.Milliseconds())/float64(b.N), "settle-cpu-ms")
				b.ReportMetric(float64(readCPU.Milliseconds())/float64(b.N), "read-cpu-ms")
				b.ReportMetric(float64(verifyCPU.Milliseconds())/float64(b.N), "verify-cpu-ms")
			})
		}
	}
}
