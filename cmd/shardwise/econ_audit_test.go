package main

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// auditBook writes a SQLite economy store through the store API, as
// sessions and settles write it, and returns its URL. A clean book is an
// operator's funding and one session settled netted; lost adds the
// footprint the replay path of issue 27 left: a session whose accepted
// movement (key "K2") the settle refused, finished replayed with no posting
// for it.
func auditBook(t *testing.T, lost bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "econ.db")
	ctx := t.Context()
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Post(ctx, ledger.Posting{ID: "fund-w", Legs: []ledger.Leg{ledger.Debit("platform:mint", 100), ledger.Credit(ledger.Spendable("w"), 100)}}))
	journal := func(id, key string, legs []ledger.Leg) netting.Fence {
		t.Helper()
		_, err := s.CreateSession(ctx, netting.SessionMeta{ID: id, Scope: "S", NodeID: "econ-a", ChunkWidth: 8})
		must(err)
		must(s.Append(ctx, []netting.JournalRecord{{SessionID: id, Seq: 0, Key: key, Legs: legs,
			PrevHash: netting.GenesisHash, Hash: netting.ChainHash(netting.GenesisHash, key, legs)}}))
		f, err := s.ClaimSettle(ctx, id, "econ-a", time.Minute)
		must(err)
		return f
	}
	spend := []ledger.Leg{ledger.Debit(ledger.Spendable("w"), 40), ledger.Credit("platform:sink", 40)}
	f := journal("sess:S1:n-0", "K1", spend)
	must(s.PostFenced(ctx, f, ledger.Posting{ID: "net_sess:S1:n-0_c0", Legs: spend, Meta: map[string]string{"chunk": "1/1"}}))
	must(s.FinishSettle(ctx, f, netting.ModeNetted))
	if lost {
		f = journal("sess:S2:n-0", "K2", []ledger.Leg{ledger.Debit(ledger.Spendable("w"), 100), ledger.Credit("platform:sink", 100)})
		must(s.MarkReplaying(ctx, f))
		must(s.FinishSettle(ctx, f, netting.ModeReplayed))
	}
	return "sqlite://" + path
}

// TestEconAuditSeesALostMovement: "econ audit" of a clean store is ok (exit
// 0); of a store where an accepted movement never reached the ledger it
// names the movement and exits with status 1 — the audit printed "ok" over
// that footprint before issue 27. --json and --account report the same.
func TestEconAuditSeesALostMovement(t *testing.T) {
	clean := auditBook(t, false)
	out := runShardwise(t, "econ", "audit", "--store", clean, "--settled", "--account", ledger.Spendable("w"))
	for _, want := range []string{"missing           0 ", "unbacked          0 ", "sessions          1 (1 settled)", "account           w:spendable balance 60 pending 0", "audit: ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("clean audit lacks %q:\n%s", want, out)
		}
	}

	lost := auditBook(t, true)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := shardwiseCommand(t, ctx, "econ", "audit", "--store", lost)
	b, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("audit of a lost movement: %v, want exit status 1\n%s", err, b)
	}
	for _, want := range []string{"missing           1 ", "problem: accepted movement K2 (session sess:S2:n-0 seq 0, settled replayed) is not in the ledger: no posting mv_sess:S2:n-0_0", "audit: FAILED"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("audit lacks %q:\n%s", want, b)
		}
	}

	out, err = runCmd(t, newRootCmd(), "", "econ", "audit", "--store", lost, "--json")
	var rep struct {
		OK       bool                   `json:"ok"`
		Missing  []econ.MissingMovement `json:"missing"`
		Unbacked []econ.UnbackedPosting `json:"unbacked"`
		Balances []econ.AccountBalance  `json:"balances"`
		Listed   bool                   `json:"sessions_listed"`
	}
	if err == nil || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("audit --json: %v\n%s", err, out)
	}
	want := econ.MissingMovement{SessionID: "sess:S2:n-0", Scope: "S", Seq: 0, Key: "K2", Mode: netting.ModeReplayed, Reason: "no posting mv_sess:S2:n-0_0"}
	if rep.OK || len(rep.Missing) != 1 || rep.Missing[0] != want || len(rep.Unbacked) != 0 || !rep.Listed {
		t.Fatalf("audit --json: %+v", rep)
	}
	if len(rep.Balances) != 3 || rep.Balances[2] != (econ.AccountBalance{Account: "w:spendable", Balance: 60}) {
		t.Fatalf("audit --json balances: %+v", rep.Balances)
	}
}
