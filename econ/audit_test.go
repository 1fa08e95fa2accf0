package econ

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// auditStores are the stores the audit is checked on: every store that
// implements SessionLister.
func auditStores(t *testing.T) map[string]func(t *testing.T) netting.SharedStore {
	return map[string]func(t *testing.T) netting.SharedStore{
		"memory": func(t *testing.T) netting.SharedStore { return netting.NewMemStore() },
		"sqlite": func(t *testing.T) netting.SharedStore { s, _ := newSQLite(t); return s },
		"postgres": func(t *testing.T) netting.SharedStore {
			s, err := sqlstore.Open(testCtx(t), testenv.StartPostgres(t).NewDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// ledgerBook writes sessions into a store through the Store port, as the
// settle core writes them, so a test can leave exactly the footprint it
// wants: a session journaled, settled netted or replayed, with any of its
// postings left out.
type ledgerBook struct {
	t     testing.TB
	ctx   context.Context
	store netting.SharedStore
}

// journal creates session id (scope "scope-"+id) and journals one row per
// movement, keys id+"-k<seq>".
func (b ledgerBook) journal(id string, moves ...[]ledger.Leg) []netting.JournalRecord {
	b.t.Helper()
	if _, err := b.store.CreateSession(b.ctx, netting.SessionMeta{ID: id, Scope: "scope-" + id, NodeID: "econ-a", ChunkWidth: 2}); err != nil {
		b.t.Fatal(err)
	}
	prev := netting.GenesisHash
	var recs []netting.JournalRecord
	for i, legs := range moves {
		key := fmt.Sprintf("%s-k%d", id, i)
		h := netting.ChainHash(prev, key, legs)
		recs = append(recs, netting.JournalRecord{SessionID: id, Seq: int64(i), Key: key, Legs: legs, PrevHash: prev, Hash: h})
		prev = h
	}
	if err := b.store.Append(b.ctx, recs); err != nil {
		b.t.Fatal(err)
	}
	return recs
}

func (b ledgerBook) claim(id string) netting.Fence {
	b.t.Helper()
	f, err := b.store.ClaimSettle(b.ctx, id, "settler", time.Minute)
	if err != nil {
		b.t.Fatal(err)
	}
	return f
}

func (b ledgerBook) post(f netting.Fence, p ledger.Posting) {
	b.t.Helper()
	if err := b.store.PostFenced(b.ctx, f, p); err != nil {
		b.t.Fatalf("post %s: %v", p.ID, err)
	}
}

func (b ledgerBook) finish(f netting.Fence, mode string) {
	b.t.Helper()
	if err := b.store.FinishSettle(b.ctx, f, mode); err != nil {
		b.t.Fatal(err)
	}
}

// settleNetted posts the session's chunks (one per given list of legs,
// each balanced through the clearing account) and finishes it netted.
func (b ledgerBook) settleNetted(id string, chunks ...[]ledger.Leg) {
	b.t.Helper()
	f := b.claim(id)
	for i, legs := range chunks {
		var sum int64
		for _, l := range legs {
			sum += l.Amount
		}
		if sum != 0 {
			legs = append(slices.Clone(legs), ledger.Leg{Account: ledger.NettingClearing, Amount: -sum})
		}
		b.post(f, ledger.Posting{ID: fmt.Sprintf("net_%s_c%d", id, i), Legs: legs, Meta: map[string]string{
			"kind": "netting_chunk", "session": id, "chunk": fmt.Sprintf("%d/%d", i+1, len(chunks)),
		}})
	}
	b.finish(f, netting.ModeNetted)
}

// settleReplayed posts the replay posting of the rows whose seqs are given
// and finishes the session replayed: the rows left out are the footprint
// of a replay that refused them.
func (b ledgerBook) settleReplayed(id string, recs []netting.JournalRecord, posted ...int64) {
	b.t.Helper()
	f := b.claim(id)
	if err := b.store.MarkReplaying(b.ctx, f); err != nil {
		b.t.Fatal(err)
	}
	for _, r := range recs {
		if slices.Contains(posted, r.Seq) {
			b.post(f, ledger.Posting{ID: replayPostingID(id, r.Seq), Legs: r.Legs, Meta: map[string]string{"kind": "netting_replay", "session": id, "key": r.Key}})
		}
	}
	b.finish(f, netting.ModeReplayed)
}

var (
	mintTo = func(w string, n int64) []ledger.Leg {
		return []ledger.Leg{ledger.Debit("platform:mint", n), ledger.Credit(ledger.Spendable(w), n)}
	}
	pay = func(from, to string, n int64) []ledger.Leg {
		return []ledger.Leg{ledger.Debit(ledger.Spendable(from), n), ledger.Credit(ledger.Spendable(to), n)}
	}
)

// TestAuditMatchesJournalAndLedger: on a sound ledger the audit is ok and
// reports each account; every footprint of a lost or unbacked movement is
// named, and fails it.
func TestAuditMatchesJournalAndLedger(t *testing.T) {
	for name, open := range auditStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			store := open(t)
			b := ledgerBook{t: t, ctx: ctx, store: store}
			if err := store.Post(ctx, ledger.Posting{ID: "fund-u1", Legs: mintTo("u1", 100)}); err != nil {
				t.Fatal(err)
			}
			// Netted in two chunks.
			b.journal("sess:a:n-0", mintTo("u2", 50), pay("u1", "u3", 30), pay("u3", "u2", 10))
			b.settleNetted("sess:a:n-0",
				[]ledger.Leg{ledger.Debit("platform:mint", 50), ledger.Credit(ledger.Spendable("u2"), 60)},
				[]ledger.Leg{ledger.Debit(ledger.Spendable("u1"), 30), ledger.Credit(ledger.Spendable("u3"), 20)})
			// Replayed after its first chunk, compensated.
			recs := b.journal("sess:b:n-0", pay("u2", "u4", 20), pay("u4", "u5", 5))
			f := b.claim("sess:b:n-0")
			b.post(f, ledger.Posting{ID: "net_sess:b:n-0_c0", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("u2"), 20), ledger.Credit(ledger.NettingClearing, 20)},
				Meta: map[string]string{"chunk": "1/2"}})
			b.post(f, ledger.Posting{ID: "net_sess:b:n-0_c0_comp", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("u2"), 20), ledger.Debit(ledger.NettingClearing, 20)}})
			if err := store.MarkReplaying(ctx, f); err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				b.post(f, ledger.Posting{ID: replayPostingID("sess:b:n-0", r.Seq), Legs: r.Legs})
			}
			b.finish(f, netting.ModeReplayed)
			// Netted, and its movements cancel out: no chunk at all.
			b.journal("sess:c:n-0", pay("u5", "u1", 5), pay("u1", "u5", 5))
			b.settleNetted("sess:c:n-0")
			// Open: not judged.
			b.journal("sess:d:n-0", pay("u3", "u1", 1))

			rep, err := Audit(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			if p := rep.Problems(false); len(p) > 0 || !rep.OK(false) {
				t.Fatalf("a sound ledger: %v", p)
			}
			if !rep.SessionsListed || rep.Sessions != 4 || rep.SettledSessions != 3 || rep.Postings != 7 || rep.SessionPostings != 6 {
				t.Fatalf("counts: listed %v, sessions %d settled %d, postings %d (settle %d)", rep.SessionsListed, rep.Sessions, rep.SettledSessions, rep.Postings, rep.SessionPostings)
			}
			if got := rep.Balance(ledger.Spendable("u2")); got.Balance != 40 || got.Pending != 0 {
				t.Fatalf("u2: %+v, want balance 40", got)
			}
			if got := rep.Balance("nobody:spendable"); got != (AccountBalance{Account: "nobody:spendable"}) {
				t.Fatalf("an account never seen: %+v", got)
			}

			// The old replay path's footprint: a session settled replayed
			// whose only movement has no posting. Nothing else names it.
			lost := b.journal("sess:e:n-0", pay("u4", "u1", 10))
			b.settleReplayed("sess:e:n-0", lost)
			// A replayed session that lost its second row.
			part := b.journal("sess:f:n-0", pay("u1", "u2", 1), pay("u2", "u1", 2))
			b.settleReplayed("sess:f:n-0", part, 0)
			// A netted session whose last chunk is not in the ledger.
			b.journal("sess:g:n-0", mintTo("u6", 7), mintTo("u7", 8), mintTo("u8", 9))
			f = b.claim("sess:g:n-0")
			b.post(f, ledger.Posting{ID: "net_sess:g:n-0_c0", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("u6"), 7), ledger.Credit(ledger.Spendable("u7"), 8), ledger.Debit(ledger.NettingClearing, 15)},
				Meta: map[string]string{"chunk": "1/2"}})
			b.finish(f, netting.ModeNetted)
			// Postings no accepted row stands behind.
			for _, p := range []ledger.Posting{
				{ID: "mv_sess:a:n-0_7", Legs: pay("u1", "u9", 1)},
				{ID: "mv_sess:b:n-0_1", Legs: pay("u4", "u5", 5)}, // already posted: an id is posted once
				{ID: "net_sess:z:n-0_c0", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("u9"), 3), ledger.Debit(ledger.NettingClearing, 3)}},
				{ID: "mv_sess:a:n-0_1", Legs: pay("u1", "u3", 30)},
			} {
				if err := store.Post(ctx, p); err != nil {
					t.Fatal(err)
				}
			}

			rep, err = Audit(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			var missing []string
			for _, m := range rep.Missing {
				missing = append(missing, fmt.Sprintf("%s/%d %s", m.SessionID, m.Seq, m.Key))
			}
			wantMissing := []string{
				"sess:e:n-0/0 sess:e:n-0-k0",
				"sess:f:n-0/1 sess:f:n-0-k1",
				"sess:g:n-0/0 sess:g:n-0-k0", "sess:g:n-0/1 sess:g:n-0-k1", "sess:g:n-0/2 sess:g:n-0-k2",
			}
			if !slices.Equal(missing, wantMissing) {
				t.Errorf("missing %q, want %q", missing, wantMissing)
			}
			var unbacked []string
			for _, u := range rep.Unbacked {
				unbacked = append(unbacked, u.PostingID)
			}
			if want := []string{"mv_sess:a:n-0_7", "net_sess:z:n-0_c0", "mv_sess:a:n-0_1"}; !slices.Equal(unbacked, want) {
				t.Errorf("unbacked %q, want %q", unbacked, want)
			}
			p := strings.Join(rep.Problems(false), "\n")
			for _, want := range []string{"accepted movement sess:e:n-0-k0 (session sess:e:n-0 seq 0, settled replayed) is not in the ledger: no posting mv_sess:e:n-0_0",
				"chunk 2 of 2 (net_sess:g:n-0_c1) is not posted", "posting net_sess:z:n-0_c0 (chain seq", "counted twice"} {
				if !strings.Contains(p, want) {
					t.Errorf("problems lack %q:\n%s", want, p)
				}
			}
			if rep.OK(false) || rep.Breaches() != 8 {
				t.Errorf("OK %v with %d breaches, want 8", rep.OK(false), rep.Breaches())
			}
		})
	}
}

// listless hides a store's SessionLister.
type listless struct{ netting.SharedStore }

// TestAuditWithoutASessionList: a store that cannot list its sessions is
// audited through its postings and unsettled sessions; the audit says so,
// and still finds a lost movement of a session that has another posting.
func TestAuditWithoutASessionList(t *testing.T) {
	ctx := testCtx(t)
	store := netting.NewMemStore()
	b := ledgerBook{t: t, ctx: ctx, store: store}
	if err := store.Post(ctx, ledger.Posting{ID: "fund-u1", Legs: mintTo("u1", 100)}); err != nil {
		t.Fatal(err)
	}
	recs := b.journal("sess:f:n-0", pay("u1", "u2", 1), pay("u2", "u1", 2))
	b.settleReplayed("sess:f:n-0", recs, 0)
	rep, err := Audit(ctx, listless{store})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SessionsListed || len(rep.Missing) != 1 || rep.Missing[0].Key != "sess:f:n-0-k1" {
		t.Fatalf("listed %v, missing %+v", rep.SessionsListed, rep.Missing)
	}
}

// TestSessionListerPages: every store the audit lists sessions of pages
// through all of them in id order, settled or not, with or without rows.
func TestSessionListerPages(t *testing.T) {
	for name, open := range auditStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			store := open(t)
			b := ledgerBook{t: t, ctx: ctx, store: store}
			b.journal("sess:b:n-0", mintTo("u1", 1))
			b.settleNetted("sess:b:n-0", mintTo("u1", 1))
			b.journal("sess:a:n-0", mintTo("u1", 1))
			if _, err := store.CreateSession(ctx, netting.SessionMeta{ID: "sess:c:n-0", Scope: "c", NodeID: "econ-a", ChunkWidth: 2}); err != nil {
				t.Fatal(err)
			}
			lister, ok := store.(SessionLister)
			if !ok {
				t.Fatalf("%T is no SessionLister", store)
			}
			var got []string
			for after := ""; ; {
				page, err := lister.ListSessions(ctx, after, 2)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range page {
					got = append(got, fmt.Sprintf("%s settled=%v", m.ID, m.Settled))
				}
				if len(page) < 2 {
					break
				}
				after = page[len(page)-1].ID
			}
			want := []string{"sess:a:n-0 settled=false", "sess:b:n-0 settled=true", "sess:c:n-0 settled=false"}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %q, want %q", got, want)
			}
		})
	}
}

// TestAuditTellsTheTruthAboutCrossScopeSpending is issue 27's sequence 1 on
// real nodes: a credit accepted in one scope, a debit spending it accepted
// (or not) in a scope another node owns, the spender's node settling
// first. Whatever the spending rule, the audit must be true: it is ok
// exactly when every movement a caller saw accepted is in the ledger (the
// balances equal those replayed from the accepted movements), and it names
// exactly the accepted movements that are not. Before issue 27 the rule
// accepted the debit, the settle's replay dropped it, and the audit said ok.
func TestAuditTellsTheTruthAboutCrossScopeSpending(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	ctx := testCtx(t)
	a := startNode(t, prefix, "econ-a", store, Config{})
	b := startNode(t, prefix, "econ-b", store, Config{})
	waitView(t, []string{"econ-a", "econ-b"}, a, b)
	owner := router(t, "econ-a", "econ-b")
	s1, s2 := scopeOwnedBy(t, owner, "econ-a"), scopeOwnedBy(t, owner, "econ-b")

	want := map[string]int64{}
	var accepted []string
	record := func(n *Node, scope, key string, legs ...ledger.Leg) {
		t.Helper()
		out, err := n.Record(ctx, scope, netting.Movement{Key: key, Legs: legs})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		t.Logf("%s on %s: %+v", key, n.Name(), out)
		if out.Status == netting.Accepted {
			accepted = append(accepted, key)
			for _, l := range legs {
				want[l.Account] -= l.Amount // balances are credit-normal
			}
		}
	}
	record(a, s1, "K1", ledger.Debit("platform:mint", 100), ledger.Credit(ledger.Spendable("w"), 100))
	record(b, s2, "K2", ledger.Debit(ledger.Spendable("w"), 100), ledger.Credit("platform:sink", 100))
	for _, n := range []*Node{b, a} {
		reps, err := n.SettleAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("settle on %s: %+v", n.Name(), reps)
	}

	rep, err := Audit(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, key := range accepted {
		if rec, ok, err := store.LookupKey(ctx, key); err != nil || !ok {
			t.Fatalf("accepted %s is not journaled: %+v %v %v", key, rec, ok, err)
		}
	}
	allIn := true
	for acc, w := range want {
		if got := rep.Balance(acc).Balance; got != w {
			allIn = false
			t.Logf("%s: balance %d, the accepted movements make it %d", acc, got, w)
		}
	}
	for _, m := range rep.Missing {
		lost = append(lost, m.Key)
	}
	t.Logf("accepted %v; audit ok %v, missing %v, problems %v", accepted, rep.OK(true), lost, rep.Problems(true))
	if rep.OK(true) != allIn {
		t.Fatalf("audit ok %v, but every accepted movement in the ledger: %v", rep.OK(true), allIn)
	}
	if !allIn && !slices.Equal(lost, []string{"K2"}) {
		t.Fatalf("audit names %v missing; the lost movement is K2", lost)
	}
}

// BenchmarkAudit audits a SQLite store of 500 sessions of 20 movements
// each, settled netted (half of them) or replayed: what an operator's
// "econ audit" reads per settled session.
func BenchmarkAudit(b *testing.B) {
	ctx := context.Background()
	store, _ := newSQLite(b)
	book := ledgerBook{t: b, ctx: ctx, store: store}
	if err := store.Post(ctx, ledger.Posting{ID: "fund", Legs: mintTo("u0", 1_000_000)}); err != nil {
		b.Fatal(err)
	}
	for s := range 500 {
		id := fmt.Sprintf("sess:m%d:n-0", s)
		var moves [][]ledger.Leg
		for i := range 20 {
			moves = append(moves, pay("u0", fmt.Sprintf("u%d", 1+(s*20+i)%300), 1))
		}
		recs := book.journal(id, moves...)
		if s%2 == 0 {
			book.settleReplayed(id, recs, seqs(len(recs))...)
			continue
		}
		var chunk []ledger.Leg
		for _, r := range recs {
			chunk = append(chunk, r.Legs...)
		}
		book.settleNetted(id, chunk)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rep, err := Audit(ctx, store)
		if err != nil || !rep.OK(true) || rep.Sessions != 500 {
			b.Fatalf("%v %v %d", err, rep.Problems(true), rep.Sessions)
		}
	}
}

func seqs(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}
