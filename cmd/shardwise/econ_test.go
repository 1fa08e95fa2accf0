package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

var econReadyRE = regexp.MustCompile(`econ (\S+) ready: serving (\S+)`)

// TestEconProcessesSurviveSIGKILL runs three "shardwise econ" processes on
// one embedded etcd and one SQLite file, puts a load of callers on them
// through the Go client, and SIGKILLs one while it has an open epoch with
// movements in it. Its lease expires, the survivors re-form and take its
// scopes, their sweep settles its orphans; after a graceful stop of the
// survivors the money is sound and settled, and every movement a caller
// saw accepted is in the journal exactly once (the callers retried every
// unknown outcome with its key until it was known).
func TestEconProcessesSurviveSIGKILL(t *testing.T) {
	testEconKill(t, "sqlite://"+filepath.Join(t.TempDir(), "econ.db"))
}

// TestEconProcessesSurviveSIGKILLPostgres is the same on PostgreSQL.
func TestEconProcessesSurviveSIGKILLPostgres(t *testing.T) {
	testEconKill(t, testenv.StartPostgres(t).NewDatabase(t))
}

func testEconKill(t *testing.T, storeURL string) {
	eps, cl := etcdForCmdTest(t)
	names := []string{"econ-a", "econ-b", "econ-c"}
	procs := map[string]*shardwiseProcess{}
	for _, name := range names {
		procs[name] = startShardwise(t, "econ", "--endpoints", eps, "--name", name, "--store", storeURL,
			"--epoch", "1s", "--sweep-bound", "2s", "--settle-lease", "1s", "--ttl", "1s")
	}
	for _, name := range names {
		p := procs[name]
		testenv.PollUntil(t, 30*time.Second, name+"'s ready line", func() bool {
			if p.exited() {
				t.Fatalf("%s exited: %v\n%s", name, p.err, p.out.String())
			}
			return econReadyRE.MatchString(p.out.String())
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client, err := econ.NewClient(ctx, econ.ClientConfig{Members: cl, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	store, err := sqlstore.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// The callers: each movement is a grant of 1..5 to one of 40 users
	// under one of 12 scopes, retried with its key until its outcome is
	// known.
	var (
		accepted   sync.Map // key → amount
		total      atomic.Int64
		count      atomic.Int64
		hardErrors sync.Map
	)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				amount := int64(1 + (i+w)%5)
				m := netting.Movement{Key: key, Legs: []ledger.Leg{
					ledger.Debit(ledger.Revenue, amount),
					ledger.Credit(ledger.Spendable(fmt.Sprintf("user-%d", (i*7+w)%40)), amount),
				}}
				scope := fmt.Sprintf("market-%d", (i+3*w)%12)
				for {
					// The movement's own deadline outlasts the load: a
					// known outcome for every key is what the test checks.
					out, err := client.Record(ctx, scope, m)
					if err == nil {
						if out.Status == netting.Accepted {
							accepted.Store(key, amount)
							total.Add(amount)
							count.Add(1)
						}
						break
					}
					if errors.Is(err, econ.ErrOutcomeUnknown) || errors.Is(err, econ.ErrNotReady) {
						continue
					}
					if ctx.Err() != nil {
						return
					}
					hardErrors.Store(key, err)
					break
				}
			}
		})
	}

	testenv.PollUntil(t, 30*time.Second, "movements accepted before the kill", func() bool { return count.Load() >= 200 })
	// Kill econ-b while it has an open epoch with rows in it.
	var orphans []string
	// Listed every 10 ms: an epoch is open for 1 s (--epoch).
	pollEvery(t, 30*time.Second, 10*time.Millisecond, "econ-b holding an open epoch with movements", func() bool {
		list, err := store.ListUnsettled(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		orphans = orphans[:0]
		for _, u := range list {
			if u.NodeID == "econ-b" && u.Records > 0 {
				orphans = append(orphans, u.ID)
			}
		}
		if len(orphans) == 0 {
			return false
		}
		if err := procs["econ-b"].cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		return true
	})
	<-procs["econ-b"].done
	killedAt := count.Load()
	t.Logf("killed econ-b with %d open epochs holding rows; %d movements accepted so far", len(orphans), killedAt)

	pollEvery(t, 60*time.Second, 20*time.Millisecond, "the survivors' sweep settling econ-b's orphans", func() bool {
		list, err := store.ListUnsettled(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list {
			for _, o := range orphans {
				if u.ID == o {
					return false
				}
			}
		}
		return true
	})
	testenv.PollUntil(t, 30*time.Second, "movements accepted after the kill", func() bool { return count.Load() >= killedAt+200 })
	stopLoad()
	wg.Wait()
	hardErrors.Range(func(k, v any) bool {
		t.Errorf("movement %v: %v", k, v)
		return true
	})
	// The survivors stop together: each settles its sessions on the way
	// out (about 2 s), and neither waits for the other.
	survivors := []string{"econ-a", "econ-c"}
	stopErrs := make([]error, len(survivors))
	var stops sync.WaitGroup
	for i, name := range survivors {
		stops.Go(func() { stopErrs[i] = procs[name].stop(30 * time.Second) })
	}
	stops.Wait()
	for i, name := range survivors {
		if stopErrs[i] != nil {
			t.Fatalf("%s did not stop cleanly: %v", name, stopErrs[i])
		}
	}

	rep, err := econ.Audit(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Problems(true); len(p) > 0 {
		t.Fatalf("audit after the survivors stopped: %v", p)
	}
	if rep.Wallets != total.Load() {
		t.Fatalf("wallets hold %d, the callers saw %d accepted", rep.Wallets, total.Load())
	}
	n := 0
	accepted.Range(func(k, _ any) bool {
		n++
		if _, ok, err := store.LookupKey(ctx, k.(string)); err != nil || !ok {
			t.Errorf("accepted key %v not in the journal (%v)", k, err)
		}
		return true
	})
	// The commands run in this process (runCmd): the processes were the
	// econ nodes; starting two more race-built ones cost 2.5 s of the test.
	out, err := runCmd(t, newRootCmd(), "", "econ", "audit", "--store", storeURL, "--settled")
	if err != nil || !strings.Contains(out, "audit: ok") {
		t.Fatalf("econ audit: %v\n%s", err, out)
	}
	// Three processes posted their settles into one chain, and the
	// survivors the killed one's orphans: the ledger proves itself.
	verified, err := runCmd(t, newRootCmd(), "", "econ", "verify", "--store", storeURL)
	if err != nil || !strings.Contains(verified, "verify: intact") {
		t.Fatalf("econ verify: %v\n%s", err, verified)
	}
	t.Logf("%d movements accepted, %d before the kill; audit:\n%s%s", n, killedAt, out, verified)
}

// TestZoneEconomyPaysLoot runs a zone node of the reference game with
// --economy against a "shardwise econ" process: the bots' kills are paid as
// movements on the economy node (the zone node writes no money itself), and
// after a graceful stop the audit finds the coins in wallets, the ledger
// sound and everything settled.
func TestZoneEconomyPaysLoot(t *testing.T) {
	t.Parallel() // waits on processes and sockets: see main_test.go
	eps, _ := etcdForCmdTest(t)
	storeURL := "sqlite://" + filepath.Join(t.TempDir(), "econ.db")
	econProc := startShardwise(t, "econ", "--endpoints", eps, "--name", "econ-a", "--store", storeURL, "--epoch", "1s")
	testenv.PollUntil(t, 30*time.Second, "econ-a's ready line", func() bool {
		if econProc.exited() {
			t.Fatalf("econ-a exited: %v\n%s", econProc.err, econProc.out.String())
		}
		return econReadyRE.MatchString(econProc.out.String())
	})
	certs := filepath.Join(t.TempDir(), "certs")
	if _, err := runCmd(t, newRootCmd(), "", "certs", "--dir", certs, "--nodes", "zone-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, newRootCmd(), "", "regions", "apply", gameTableFile(t, "zone-a"), "--force", "--endpoints", eps); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, newRootCmd(), "", "zone", "--endpoints", eps, "--name", "zone-a", "--certs", certs,
		"--economy", "plaintext", "--ticks", "300", "--tick", "20ms", "--players", "64")
	if err != nil {
		t.Fatalf("zone: %v\n%s", err, out)
	}
	if err := econProc.stop(30 * time.Second); err != nil {
		t.Fatalf("econ-a did not stop cleanly: %v", err)
	}
	ctx := t.Context()
	store, err := sqlstore.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rep, err := econ.Audit(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Problems(true); len(p) > 0 {
		t.Fatalf("audit: %v", p)
	}
	if rep.Wallets <= 0 {
		t.Fatalf("no loot reached a wallet in 300 ticks of 64 players fighting (wallets %d)", rep.Wallets)
	}
	t.Logf("wallets hold %d coins after 300 ticks", rep.Wallets)
}
