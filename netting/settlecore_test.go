package netting

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/ledger"
)

// The settle's core, with no store: each case scripts the results of the
// calls the step asks for (and the node's clock at each), and checks the
// calls, the report or error, and what the session must remember.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// settleJournal is a verified journal of session "s": alice buys from bob
// for each amount, and (if carol > 0) carol buys from dave.
func settleJournal(amounts ...int64) []JournalRecord {
	var recs []JournalRecord
	prev := GenesisHash
	for i, a := range amounts {
		legs := []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), a), ledger.Credit(ledger.Earned("bob"), a)}
		if i%2 == 1 {
			legs = []ledger.Leg{ledger.Debit(ledger.Spendable("carol"), a), ledger.Credit(ledger.Earned("dave"), a)}
		}
		key := fmt.Sprintf("k%d", i)
		h := ChainHash(prev, key, legs)
		recs = append(recs, JournalRecord{SessionID: "s", Seq: int64(i), Key: key, Legs: legs, PrevHash: prev, Hash: h})
		prev = h
	}
	return recs
}

// settleCall is one scripted call: the action the step must ask for (and,
// for a post, the posting id), the clock reading when it is asked, and the
// result.
type settleCall struct {
	want    settleActionKind
	posting string // settlePost: the posting id asked for
	release string // settlePost / settleRelease: fmt of the release, when set
	at      time.Duration
	res     settleResult
}

type settleWant struct {
	err       string // substring; "" means success
	is        error  // errors.Is target, when set
	mode      string
	postings  int
	rejected  []string
	already   bool
	settled   bool
	reopen    bool
	replaying bool
	refused   int  // chunk index of the refusal, -1 none
	handBack  bool // the claim's hand-back failed (for the log)
}

func runSettle(t *testing.T, c *settleStep, script []settleCall) {
	t.Helper()
	for i, call := range script {
		a := c.next(t0.Add(call.at))
		if a.kind != call.want {
			t.Fatalf("call %d: step asked for %v, script has %v", i, a.kind, call.want)
		}
		if call.posting != "" && a.posting.ID != call.posting {
			t.Fatalf("call %d: posting %s, want %s", i, a.posting.ID, call.posting)
		}
		if call.release != "" && fmt.Sprint(a.deltas) != call.release {
			t.Errorf("call %d: release %v, want %s", i, a.deltas, call.release)
		}
		if a.kind == settlePost || a.kind == settleRelease || a.kind == settleMarkReplaying || a.kind == settleFinish {
			if a.fence != c.fence || a.fence.Token == 0 {
				t.Errorf("call %d: fence %+v, want the held %+v", i, a.fence, c.fence)
			}
		}
		if a.kind == settlePost && call.release == "" && !releasesOwn(a.release, a.posting.Legs) {
			t.Errorf("call %d: a posting releases %v, want its own deltas", i, a.release)
		}
		c.advance(call.res)
	}
	if a := c.next(t0.Add(time.Hour)); a.kind != settleDone {
		t.Fatalf("after the script the step asks for %v, want done", a.kind)
	}
}

func checkSettle(t *testing.T, c *settleStep, w settleWant) {
	t.Helper()
	rep, err := c.report()
	switch {
	case w.err == "" && err != nil:
		t.Fatalf("error %v, want none", err)
	case w.err != "" && (err == nil || !strings.Contains(err.Error(), w.err)):
		t.Fatalf("error %v, want one containing %q", err, w.err)
	case w.is != nil && !errors.Is(err, w.is):
		t.Fatalf("error %v, want errors.Is %v", err, w.is)
	}
	if err == nil {
		if rep.Mode != w.mode || rep.Postings != w.postings || rep.AlreadySettled != w.already {
			t.Errorf("report %+v, want mode %s postings %d already %v", rep, w.mode, w.postings, w.already)
		}
		var rej []string
		for _, r := range rep.Rejected {
			rej = append(rej, r.Key+"/"+r.Code)
		}
		if fmt.Sprint(rej) != fmt.Sprint(w.rejected) {
			t.Errorf("rejected %v, want %v", rej, w.rejected)
		}
	}
	if c.settled != w.settled || c.reopen != w.reopen || c.replaying != w.replaying {
		t.Errorf("settled %v reopen %v replaying %v, want %v %v %v", c.settled, c.reopen, c.replaying, w.settled, w.reopen, w.replaying)
	}
	refused := -1
	if c.refused != nil {
		refused = c.refused.chunk
	}
	if refused != w.refused {
		t.Errorf("refused chunk %d, want %d", refused, w.refused)
	}
	if (c.handBackErr != nil) != w.handBack {
		t.Errorf("hand-back error %v, want one: %v", c.handBackErr, w.handBack)
	}
}

func TestSettleStep(t *testing.T) {
	recs := settleJournal(30, 20, 10) // width 1: chunks alice, bob, carol, dave
	fence := Fence{SessionID: "s", Owner: "me", Token: 3}
	renewed := Fence{SessionID: "s", Owner: "me", Token: 4}
	open := SessionMeta{ID: "s", ChunkWidth: 1, Sealed: true}
	overdraft := ledger.OverdraftError("alice:spendable", -30)
	boom := errors.New("store down")
	then := func(a []settleCall, b ...settleCall) []settleCall {
		return append(append([]settleCall(nil), a...), b...)
	}
	// prefix is every call up to the first settle write, for a session
	// object that has journaled rows: the journal is read once, under the
	// claim.
	prefix := func(meta SessionMeta) []settleCall {
		return []settleCall{
			{want: settleFlush, res: settleResult{journaled: int64(len(recs))}},
			{want: settleClaim, res: settleResult{fence: fence}},
			{want: settleReadJournal, res: settleResult{recs: recs}},
			{want: settleReadSession, res: settleResult{meta: meta}},
		}
	}
	// probed is prefix for an object that knows no rows: it asks whether
	// there is anything to settle before it claims.
	probed := func(meta SessionMeta) []settleCall {
		return then([]settleCall{{want: settleFlush}, {want: settleReadJournal, res: settleResult{recs: recs}}}, prefix(meta)[1:]...)
	}
	post := func(id string, err error) settleCall {
		return settleCall{want: settlePost, posting: id, res: settleResult{err: err}}
	}
	release := func(want string) settleCall { return settleCall{want: settleRelease, release: want} }
	finish := settleCall{want: settleFinish}
	nettedTail := []settleCall{post("net_s_c0", nil), post("net_s_c1", nil), post("net_s_c2", nil), post("net_s_c3", nil), release("[]"), finish}
	replayMeta := open
	replayMeta.Replaying = true
	settledNetted := SessionMeta{ID: "s", ChunkWidth: 1, Settled: true, SettleMode: ModeNetted}
	settledReplayed := SessionMeta{ID: "s", ChunkWidth: 1, Settled: true, SettleMode: ModeReplayed}
	tampered := settleJournal(30, 20)
	tampered[1].Legs = []ledger.Leg{ledger.Debit(ledger.Spendable("carol"), 1), ledger.Credit(ledger.Earned("dave"), 1)}

	cases := []struct {
		name      string
		prior     *SettleReport
		replaying bool
		script    []settleCall
		want      settleWant
	}{
		{"settled before by this object: nothing asked", &SettleReport{Mode: ModeNetted, Postings: 4}, false, nil,
			settleWant{mode: ModeNetted, postings: 4, already: true, refused: -1}},
		{"flush fails", nil, false, []settleCall{{want: settleFlush, res: settleResult{err: boom}}},
			settleWant{err: "store down", refused: -1}},
		{"first read fails", nil, false, []settleCall{{want: settleFlush}, {want: settleReadJournal, res: settleResult{err: boom}}},
			settleWant{err: "read journal s: store down", refused: -1}},
		{"chain broken", nil, false, []settleCall{{want: settleFlush}, {want: settleReadJournal, res: settleResult{recs: tampered}}},
			settleWant{err: "seq 1", is: ErrChainBroken, refused: -1}},
		{"empty journal, unsealed: reopened", nil, false, []settleCall{{want: settleFlush}, {want: settleReadJournal}, {want: settleReadSession, res: settleResult{meta: SessionMeta{ID: "s"}}}},
			settleWant{mode: ModeNetted, reopen: true, refused: -1}},
		{"empty journal, sealed: stays closed", nil, false, []settleCall{{want: settleFlush}, {want: settleReadJournal}, {want: settleReadSession, res: settleResult{meta: open}}},
			settleWant{mode: ModeNetted, refused: -1}},
		{"empty journal, session unreadable", nil, false, []settleCall{{want: settleFlush}, {want: settleReadJournal}, {want: settleReadSession, res: settleResult{err: boom}}},
			settleWant{err: "store down", refused: -1}},
		{"claim held by another settler: nothing written", nil, false, []settleCall{{want: settleFlush}, {want: settleReadJournal, res: settleResult{recs: recs}}, {want: settleClaim, res: settleResult{err: &ClaimHeldError{SessionID: "s", Owner: "other"}}}},
			settleWant{err: "other", is: ErrSettleClaimed, refused: -1}},
		{"claim held, rows known: nothing read or written", nil, false, []settleCall{{want: settleFlush, res: settleResult{journaled: 3}}, {want: settleClaim, res: settleResult{err: &ClaimHeldError{SessionID: "s", Owner: "other"}}}},
			settleWant{err: "other", is: ErrSettleClaimed, refused: -1}},
		{"the probe finds rows: read again under the claim", nil, false, then(probed(open), nettedTail...),
			settleWant{mode: ModeNetted, postings: 4, settled: true, refused: -1}},
		{"read under the claim fails: the claim is handed back", nil, false,
			then(prefix(open)[:2], settleCall{want: settleReadJournal, res: settleResult{err: boom}}, settleCall{want: settleHandBack}),
			settleWant{err: "read journal s: store down", refused: -1}},
		{"read after the probe fails: the claim is handed back", nil, false,
			then(probed(open)[:3], settleCall{want: settleReadJournal, res: settleResult{err: boom}}, settleCall{want: settleHandBack}),
			settleWant{err: "read journal s: store down", refused: -1}},
		{"chain broken under the claim: handed back, the hand-back fails", nil, false,
			then(prefix(open)[:2], settleCall{want: settleReadJournal, res: settleResult{recs: tampered}}, settleCall{want: settleHandBack, res: settleResult{err: boom}}),
			settleWant{err: "seq 1", is: ErrChainBroken, refused: -1, handBack: true}},
		{"rows known, none in the store: the journal is short, the claim is handed back", nil, false,
			then(prefix(open)[:2], settleCall{want: settleReadJournal}, settleCall{want: settleHandBack}),
			settleWant{err: "journal ends at 0 rows, below the 3", is: ErrChainBroken, refused: -1}},
		{"rows known, the store holds fewer: the journal is short, the claim is handed back", nil, false,
			then(prefix(open)[:2], settleCall{want: settleReadJournal, res: settleResult{recs: recs[:2]}}, settleCall{want: settleHandBack}),
			settleWant{err: "journal ends at 2 rows, below the 3", is: ErrChainBroken, refused: -1}},
		{"meta unreadable", nil, false, then(prefix(open)[:3], settleCall{want: settleReadSession, res: settleResult{err: boom}}),
			settleWant{err: "store down", refused: -1}},
		{"settled by another settler, netted", nil, false, prefix(settledNetted),
			settleWant{mode: ModeNetted, postings: 4, already: true, settled: true, refused: -1}},
		{"settled by another settler, replayed: report from the postings", nil, false,
			then(prefix(settledReplayed), settleCall{want: settleHasPostings, res: settleResult{posted: []bool{true, false, false, false, true, false, true}}}),
			settleWant{mode: ModeReplayed, postings: 3, rejected: []string{"k1/"}, already: true, settled: true, refused: -1}},
		{"settled by another settler, postings unreadable", nil, false,
			then(prefix(settledReplayed), settleCall{want: settleHasPostings, res: settleResult{err: boom}}),
			settleWant{err: "store down", refused: -1}},
		{"netted", nil, false, then(prefix(open), nettedTail...),
			settleWant{mode: ModeNetted, postings: 4, settled: true, refused: -1}},
		{"a chunk fails (not a refusal): stop, release nothing", nil, false, then(prefix(open), post("net_s_c0", nil), post("net_s_c1", boom)),
			settleWant{err: "chunk 1: store down", refused: -1}},
		{"a chunk fenced", nil, false, then(prefix(open), post("net_s_c0", &FencedError{SessionID: "s", Token: 3, Current: 4})),
			settleWant{err: "chunk 0", is: ErrFenced, refused: -1}},
		{"a chunk refused: compensate posted chunks newest first, replay each, release the refused", nil, false,
			then(prefix(open), post("net_s_c0", nil), post("net_s_c1", nil), post("net_s_c2", overdraft),
				settleCall{want: settleMarkReplaying},
				settleCall{want: settleHasPostings, res: settleResult{posted: []bool{true, true, false, false}}},
				post("net_s_c1_comp", nil), post("net_s_c0_comp", nil),
				post("mv_s_0", overdraft), post("mv_s_1", nil), post("mv_s_2", nil),
				release("[{alice:spendable -30} {bob:earned 30}]"), finish),
			settleWant{mode: ModeReplayed, postings: 4, rejected: []string{"k0/LEDGER.OVERDRAFT"}, settled: true, replaying: true, refused: 2}},
		{"replaying already (stored): no chunk is posted", nil, false,
			then(prefix(replayMeta), settleCall{want: settleMarkReplaying},
				settleCall{want: settleHasPostings, res: settleResult{posted: []bool{false, false, false, false}}},
				post("mv_s_0", nil), post("mv_s_1", nil), post("mv_s_2", nil), release("[]"), finish),
			settleWant{mode: ModeReplayed, postings: 3, settled: true, replaying: true, refused: -1}},
		{"replaying already (this object, not yet stored)", nil, true,
			then(prefix(open), settleCall{want: settleMarkReplaying},
				settleCall{want: settleHasPostings, res: settleResult{posted: []bool{true}}},
				post("net_s_c0_comp", nil), post("mv_s_0", nil), post("mv_s_1", nil), post("mv_s_2", nil), release("[]"), finish),
			settleWant{mode: ModeReplayed, postings: 4, settled: true, replaying: true, refused: -1}},
		{"mark replaying fails", nil, false, then(prefix(replayMeta), settleCall{want: settleMarkReplaying, res: settleResult{err: boom}}),
			settleWant{err: "mark replaying: store down", replaying: true, refused: -1}},
		{"compensation scan fails", nil, false, then(prefix(replayMeta), settleCall{want: settleMarkReplaying}, settleCall{want: settleHasPostings, res: settleResult{err: boom}}),
			settleWant{err: "settle s: store down", replaying: true, refused: -1}},
		{"a compensation fails", nil, false, then(prefix(replayMeta), settleCall{want: settleMarkReplaying},
			settleCall{want: settleHasPostings, res: settleResult{posted: []bool{false, true}}}, post("net_s_c1_comp", boom)),
			settleWant{err: "compensate chunk 1: store down", replaying: true, refused: -1}},
		{"a replay posting fails (not a refusal)", nil, false, then(prefix(replayMeta), settleCall{want: settleMarkReplaying},
			settleCall{want: settleHasPostings}, post("mv_s_0", nil), post("mv_s_1", boom)),
			settleWant{err: "replay seq 1: store down", replaying: true, refused: -1}},
		{"release fails", nil, false, then(prefix(open), post("net_s_c0", nil), post("net_s_c1", nil), post("net_s_c2", nil), post("net_s_c3", nil), settleCall{want: settleRelease, res: settleResult{err: boom}}),
			settleWant{err: "release reservations: store down", refused: -1}},
		{"finish fails", nil, false, then(prefix(open), post("net_s_c0", nil), post("net_s_c1", nil), post("net_s_c2", nil), post("net_s_c3", nil), release("[]"), settleCall{want: settleFinish, res: settleResult{err: boom}}),
			settleWant{err: "finish: store down", refused: -1}},
		{"half the lease passed: renew, then write", nil, false,
			then(prefix(open), post("net_s_c0", nil),
				settleCall{want: settleClaim, at: 15 * time.Second, res: settleResult{fence: renewed}},
				settleCall{want: settlePost, posting: "net_s_c1", at: 15 * time.Second},
				post("net_s_c2", nil), post("net_s_c3", nil), release("[]"), finish),
			settleWant{mode: ModeNetted, postings: 4, settled: true, refused: -1}},
		{"renewal refused", nil, false,
			then(prefix(open), settleCall{want: settleClaim, at: 20 * time.Second, res: settleResult{err: &ClaimHeldError{SessionID: "s", Owner: "other"}}}),
			settleWant{err: "chunk 0", is: ErrSettleClaimed, refused: -1}},
		{"renewal finds a claim in between: stale, stop as fenced", nil, false,
			then(prefix(open), post("net_s_c0", nil), settleCall{want: settleClaim, at: time.Minute, res: settleResult{fence: Fence{SessionID: "s", Owner: "me", Token: 9}}}),
			settleWant{err: "chunk 1", is: ErrFenced, refused: -1}},
		{"renewal before the release", nil, false,
			then(prefix(open), post("net_s_c0", nil), post("net_s_c1", nil), post("net_s_c2", nil), post("net_s_c3", nil),
				settleCall{want: settleClaim, at: 16 * time.Second, res: settleResult{err: boom}}),
			settleWant{err: "release reservations: store down", refused: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSettleStep("s", 30*time.Second, tc.prior, tc.replaying)
			runSettle(t, c, tc.script)
			checkSettle(t, c, tc.want)
		})
	}
}

// The report of a settle another settler finished is rebuilt from the
// postings alone.
func TestSettledReport(t *testing.T) {
	recs := settleJournal(5, 6)
	meta := SessionMeta{ID: "s", ChunkWidth: 2, Settled: true, SettleMode: ModeReplayed}
	chunks := chunkPostings("s", netPositions(recs), 2, len(recs), "h")
	ids := settledScanIDs(meta, chunks, recs)
	want := []string{"net_s_c0_comp", "net_s_c1_comp", "mv_s_0", "mv_s_1"}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("scan ids %v, want %v", ids, want)
	}
	rep := settledReport(meta, recs, "h", chunks, []bool{true})
	if rep.Postings != 1 || len(rep.Rejected) != 2 || rep.Netted != 2 || rep.JournalHead != "h" {
		t.Errorf("report with short answers %+v", rep)
	}
}

// releasesOwn reports whether release, its sides summed per account, is
// the posting's own wallet deltas (legs).
func releasesOwn(release []ReservedChange, legs []ledger.Leg) bool {
	net := map[string]int64{}
	for _, c := range release {
		net[c.Account] += c.Net()
	}
	want := map[string]int64{}
	for _, d := range reservationDeltas(legs) {
		want[d.Account] += d.Delta
	}
	for a, v := range net {
		if v == 0 {
			delete(net, a)
		}
	}
	return fmt.Sprint(net) == fmt.Sprint(want)
}
