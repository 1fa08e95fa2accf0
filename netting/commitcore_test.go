package netting

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/ledger"
)

// The group commit's core, with no store: each case scripts the results of
// the calls the step asks for and checks the calls, the answers, the rows
// committed and whether the session closes.

var errLost = errors.New("connection reset during COMMIT")

func testItems(keys ...string) []commitItem {
	items := make([]commitItem, len(keys))
	for i, k := range keys {
		legs := []ledger.Leg{ledger.Debit(ledger.Spendable("u-"+k), int64(i+1)), ledger.Credit(ledger.Earned("s"), int64(i+1))}
		items[i] = commitItem{key: k, legs: legs, deltas: reservationDeltas(legs)}
	}
	return items
}

// commitCall is one scripted store call: the action the step must ask for,
// and the result to report.
type commitCall struct {
	want commitActionKind
	// commitWrite: the grants build is called with (nil: build not called),
	// how many extra earlier builds the store made (a retried
	// transaction), and the error returned.
	granted []bool
	retries int
	err     error
	// commitLookup: the results, in order; wantKeys the keys asked.
	lookups  []keyLookup
	wantKeys []string
	// commitReadBack: the journal as read (journalOf: that many of the
	// rows the last build made, after `others` rows of someone else).
	journalRows int
	others      int
}

type commitWant struct {
	// answers, by key: "accepted@seq", "rejected", or "error:<substring>".
	answers map[string]string
	// committed: the keys of the rows committed, in order.
	committed []string
	closed    bool
}

func runCommit(t *testing.T, c *commitStep, script []commitCall) {
	t.Helper()
	for i, call := range script {
		a := c.next()
		if a.kind != call.want {
			t.Fatalf("call %d: step asked for %v, script has %v", i, a.kind, call.want)
		}
		switch a.kind {
		case commitWrite:
			if len(a.reqs) != len(c.live) {
				t.Fatalf("call %d: %d requests for %d live items", i, len(a.reqs), len(c.live))
			}
			for range call.retries {
				all := make([]bool, len(a.reqs))
				c.build(all)
			}
			var granted []bool
			if call.granted != nil {
				c.build(call.granted)
				granted = call.granted
			}
			if call.err != nil {
				granted = nil
			}
			c.wrote(granted, call.err)
		case commitLookup:
			if call.wantKeys != nil && fmt.Sprint(a.keys) != fmt.Sprint(call.wantKeys) {
				t.Fatalf("call %d: looked up %v, want %v", i, a.keys, call.wantKeys)
			}
			c.looked(call.lookups)
		case commitReadBack:
			if call.journalRows < 0 {
				c.readBack(nil, errors.New("read failed"))
				continue
			}
			var j []JournalRecord
			for k := range call.others {
				j = append(j, JournalRecord{Seq: int64(k), Hash: fmt.Sprintf("other-%d", k)})
			}
			c.readBack(append(j, c.recs[:call.journalRows]...), nil)
		}
	}
	if a := c.next(); a.kind != commitDone {
		t.Fatalf("after the script the step asks for %v, want done", a.kind)
	}
}

func checkCommit(t *testing.T, c *commitStep, want commitWant) {
	t.Helper()
	got := map[string]string{}
	for _, a := range c.answers {
		k := c.items[a.item].key
		if _, dup := got[k]; dup {
			t.Errorf("%s answered twice", k)
		}
		switch {
		case a.err != nil:
			got[k] = "error:" + a.err.Error()
		case a.out.Status == Rejected && a.out.Reason == ReasonInsufficientFunds && a.out.Seq == -1:
			got[k] = "rejected"
		case a.out.Status == Accepted:
			got[k] = fmt.Sprintf("accepted@%d", a.out.Seq)
		default:
			got[k] = fmt.Sprintf("%+v", a.out)
		}
	}
	for i, it := range c.accepted {
		k := c.items[it].key
		if _, dup := got[k]; dup {
			t.Errorf("%s answered and also committed", k)
		}
		got[k] = fmt.Sprintf("accepted@%d", c.rows[i].Seq)
	}
	for k, w := range want.answers {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: no answer, want %s", k, w)
		case strings.HasPrefix(w, "error:"):
			if !strings.HasPrefix(g, "error:") || !strings.Contains(g, strings.TrimPrefix(w, "error:")) {
				t.Errorf("%s: %s, want %s", k, g, w)
			}
		case g != w:
			t.Errorf("%s: %s, want %s", k, g, w)
		}
	}
	if len(got) != len(want.answers) {
		t.Errorf("answers %v, want %v", got, want.answers)
	}
	var committed []string
	for i, r := range c.rows {
		committed = append(committed, r.Key)
		if r.Key != c.items[c.accepted[i]].key {
			t.Errorf("row %d is %s, accepted item %s", i, r.Key, c.items[c.accepted[i]].key)
		}
	}
	if fmt.Sprint(committed) != fmt.Sprint(want.committed) {
		t.Errorf("committed %v, want %v", committed, want.committed)
	}
	if c.closeRecords != want.closed {
		t.Errorf("closeRecords = %v, want %v", c.closeRecords, want.closed)
	}
}

func TestCommitStep(t *testing.T) {
	found := func(seq int64) keyLookup {
		return keyLookup{ans: KeyAnswer{Found: true, Record: JournalRecord{Seq: seq}}}
	}
	refused := keyLookup{ans: KeyAnswer{Found: true, Refused: true, Refusal: RefusedKey{Reason: ReasonInsufficientFunds}}}
	cases := []struct {
		name   string
		keys   []string
		script []commitCall
		want   commitWant
	}{
		{"empty batch", nil, nil, commitWant{}},
		{"all granted",
			[]string{"a", "b", "c"},
			[]commitCall{{want: commitWrite, granted: []bool{true, true, true}}},
			commitWant{answers: map[string]string{"a": "accepted@5", "b": "accepted@6", "c": "accepted@7"}, committed: []string{"a", "b", "c"}}},
		{"some refused by the reservation check",
			[]string{"a", "b", "c"},
			[]commitCall{{want: commitWrite, granted: []bool{false, true, false}}, {want: commitLookup, wantKeys: []string{"a", "c"}, lookups: []keyLookup{{}, {}}}},
			commitWant{answers: map[string]string{"a": "rejected", "b": "accepted@5", "c": "rejected"}, committed: []string{"b"}}},
		{"all refused: nothing to append",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{false}}, {want: commitLookup, wantKeys: []string{"a"}, lookups: []keyLookup{{}}}},
			commitWant{answers: map[string]string{"a": "rejected"}}},
		{"a refused key journaled before (a resend): its first answer, not the refusal",
			[]string{"a", "resent", "b"},
			[]commitCall{{want: commitWrite, granted: []bool{true, false, false}}, {want: commitLookup, wantKeys: []string{"resent", "b"}, lookups: []keyLookup{found(17), {}}}},
			commitWant{answers: map[string]string{"a": "accepted@5", "resent": "accepted@17", "b": "rejected"}, committed: []string{"a"}}},
		{"a refused key refused before (a resend): its first refusal",
			[]string{"a", "resent"},
			[]commitCall{{want: commitWrite, granted: []bool{true, false}}, {want: commitLookup, wantKeys: []string{"resent"}, lookups: []keyLookup{refused}}},
			commitWant{answers: map[string]string{"a": "accepted@5", "resent": "rejected"}, committed: []string{"a"}}},
		{"a granted key refused before (funds arrived since): its first refusal, the rest written again",
			[]string{"a", "once-refused", "c"},
			[]commitCall{
				{want: commitWrite, granted: []bool{true, true, true}, err: &KeyConflictError{Keys: []string{"once-refused"}}},
				{want: commitLookup, wantKeys: []string{"once-refused"}, lookups: []keyLookup{refused}},
				{want: commitWrite, granted: []bool{true, true}},
			},
			commitWant{answers: map[string]string{"a": "accepted@5", "once-refused": "rejected", "c": "accepted@6"}, committed: []string{"a", "c"}}},
		{"a refused key's lookup fails: an error (retry), never a guessed refusal",
			[]string{"a", "b"},
			[]commitCall{{want: commitWrite, granted: []bool{false, false}}, {want: commitLookup, lookups: []keyLookup{{err: errors.New("db down")}}}},
			commitWant{answers: map[string]string{"a": "error:lookup of refused key \"a\": db down", "b": "error:no lookup result"}}},
		{"a retried transaction: the last build is what committed",
			[]string{"a", "b"},
			[]commitCall{{want: commitWrite, retries: 2, granted: []bool{true, false}}, {want: commitLookup, wantKeys: []string{"b"}, lookups: []keyLookup{{}}}},
			commitWant{answers: map[string]string{"a": "accepted@5", "b": "rejected"}, committed: []string{"a"}}},
		{"store never called build",
			[]string{"a", "b"},
			[]commitCall{{want: commitWrite}},
			commitWant{answers: map[string]string{"a": "error:granted 0 of 2", "b": "error:granted 0 of 2"}}},
		{"store granted too few after building: outcome unknown, read back, landed",
			[]string{"a", "b"},
			[]commitCall{{want: commitWrite, granted: []bool{true}}, {want: commitReadBack, journalRows: 1}, {want: commitLookup, wantKeys: []string{"b"}, lookups: []keyLookup{{}}}},
			commitWant{answers: map[string]string{"a": "accepted@5", "b": "rejected"}, committed: []string{"a"}}},
		{"key journaled elsewhere: answered from its row, the rest written again",
			[]string{"a", "dup", "c"},
			[]commitCall{
				{want: commitWrite, granted: []bool{true, true, true}, err: &KeyConflictError{Keys: []string{"dup"}}},
				{want: commitLookup, wantKeys: []string{"dup"}, lookups: []keyLookup{found(41)}},
				{want: commitWrite, granted: []bool{true, true}},
			},
			commitWant{answers: map[string]string{"a": "accepted@5", "dup": "accepted@41", "c": "accepted@6"}, committed: []string{"a", "c"}}},
		{"every key journaled elsewhere",
			[]string{"x", "y"},
			[]commitCall{
				{want: commitWrite, granted: []bool{true, true}, err: &KeyConflictError{Keys: []string{"y", "x"}}},
				{want: commitLookup, wantKeys: []string{"x", "y"}, lookups: []keyLookup{found(1), found(2)}},
			},
			commitWant{answers: map[string]string{"x": "accepted@1", "y": "accepted@2"}}},
		{"conflicting key's lookup fails or finds nothing or is missing",
			[]string{"e", "n", "m", "ok"},
			[]commitCall{
				{want: commitWrite, granted: []bool{true, true, true, true}, err: &KeyConflictError{Keys: []string{"e", "n", "m"}}},
				{want: commitLookup, lookups: []keyLookup{{err: errors.New("db down")}, {}}},
				{want: commitWrite, granted: []bool{true}},
			},
			commitWant{answers: map[string]string{"e": "error:lookup of conflicting key \"e\": db down", "n": "error:reported journaled but not found", "m": "error:no lookup result", "ok": "accepted@5"}, committed: []string{"ok"}}},
		{"conflict on keys we did not send: no loop",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{true}, err: &KeyConflictError{Keys: []string{"zzz"}}}},
			commitWant{answers: map[string]string{"a": "error:key conflict on unknown keys [zzz]"}}},
		{"sealed by a settle claim",
			[]string{"a", "b"},
			[]commitCall{{want: commitWrite, granted: []bool{true, true}, err: ErrSessionSettled.Wrap("sealed")}},
			commitWant{answers: map[string]string{"a": "error:session settled: sealed", "b": "error:sealed"}, closed: true}},
		{"another writer moved the journal",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{true}, err: ErrSeqConflict.Wrap("seq")}},
			commitWant{answers: map[string]string{"a": "error:reserve and append"}, closed: true}},
		{"session gone",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{true}, err: ErrSessionNotFound.Wrap("gone")}},
			commitWant{answers: map[string]string{"a": "error:gone"}}},
		{"store failed before building: nothing to resolve",
			[]string{"a"},
			[]commitCall{{want: commitWrite, err: errLost}},
			commitWant{answers: map[string]string{"a": "error:connection reset"}}},
		{"store failed after building nothing granted",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{false}, err: errLost}},
			commitWant{answers: map[string]string{"a": "error:connection reset"}}},
		{"lost reply, the write landed: accepted, not guessed",
			[]string{"a", "b", "c"},
			[]commitCall{{want: commitWrite, granted: []bool{true, false, true}, err: errLost}, {want: commitReadBack, journalRows: 2}, {want: commitLookup, wantKeys: []string{"b"}, lookups: []keyLookup{{}}}},
			commitWant{answers: map[string]string{"a": "accepted@5", "b": "rejected", "c": "accepted@6"}, committed: []string{"a", "c"}}},
		{"lost reply, the write did not land: failed, session stays open",
			[]string{"a", "b"},
			[]commitCall{{want: commitWrite, granted: []bool{true, true}, err: errLost}, {want: commitReadBack, journalRows: 0}},
			commitWant{answers: map[string]string{"a": "error:append: connection reset", "b": "error:append: connection reset"}}},
		{"lost reply, someone else's rows where ours would be: failed and closed",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{true}, err: errLost}, {want: commitReadBack, others: 7}},
			commitWant{answers: map[string]string{"a": "error:append: connection reset"}, closed: true}},
		{"lost reply and the journal cannot be read: failed and closed",
			[]string{"a"},
			[]commitCall{{want: commitWrite, granted: []bool{true}, err: errLost}, {want: commitReadBack, journalRows: -1}},
			commitWant{answers: map[string]string{"a": "error:append outcome unknown (read failed)"}, closed: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A committed journal of 5 rows ends in head "h4"; the lost-reply
			// read-backs give 5 rows of others before ours.
			c := newCommitStep("s", 5, "h4", testItems(tc.keys...), nil)
			for i := range tc.script {
				if tc.script[i].want == commitReadBack && tc.script[i].others == 0 && tc.script[i].journalRows >= 0 {
					tc.script[i].others = 5
				}
			}
			runCommit(t, c, tc.script)
			checkCommit(t, c, tc.want)
		})
	}
}

// The rows a build makes continue the committed chain: seqs from nextSeq,
// each PrevHash the previous Hash (the first the committed head), each Hash
// ChainHash of the row.
func TestCommitStepChains(t *testing.T) {
	c := newCommitStep("s", 3, "head", testItems("a", "b", "c"), nil)
	recs, refused := c.build([]bool{true, false, true})
	if len(recs) != 2 {
		t.Fatalf("%d rows", len(recs))
	}
	if len(refused) != 1 || refused[0] != (RefusedKey{Key: "b", SessionID: "s", Reason: ReasonInsufficientFunds}) {
		t.Errorf("refused %+v, want b's refusal", refused)
	}
	prev := "head"
	for i, r := range recs {
		if r.SessionID != "s" || r.Seq != int64(3+i) || r.PrevHash != prev || r.Hash != ChainHash(prev, r.Key, r.Legs) {
			t.Errorf("row %d = %+v", i, r)
		}
		prev = r.Hash
	}
	if recs[0].Key != "a" || recs[1].Key != "c" {
		t.Errorf("rows %s %s, want a c", recs[0].Key, recs[1].Key)
	}
}
