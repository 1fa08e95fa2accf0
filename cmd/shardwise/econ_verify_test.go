package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// econVerifyStore writes a small ledger into a new SQLite database and
// returns its store URL and path.
func econVerifyStore(t *testing.T) (url, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "econ.db")
	ctx := t.Context()
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []ledger.Posting{
		{ID: "fund-alice", Legs: []ledger.Leg{ledger.Credit(ledger.Spendable("alice"), 100), ledger.Debit(ledger.Revenue, 100)}},
		{ID: "buy-1", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 30), ledger.Credit(ledger.Earned("bob"), 30)}, Meta: map[string]string{"shop": "s1"}},
		{ID: "buy-2", Legs: []ledger.Leg{ledger.Debit(ledger.Spendable("alice"), 5), ledger.Credit(ledger.Earned("carol"), 5)}},
	} {
		if err := s.Post(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return "sqlite://" + path, path
}

// TestEconVerify proves a store's ledger, then tampers with a leg by direct
// SQL, as an operator's stray UPDATE would, and sees the command name the
// posting and exit with status 1.
func TestEconVerify(t *testing.T) {
	url, path := econVerifyStore(t)
	out, err := runCmd(t, newRootCmd(), "", "econ", "verify", "--store", url)
	if err != nil || !strings.Contains(out, "verify: intact") || !strings.Contains(out, "postings          3\n") {
		t.Fatalf("verify of a sound ledger: %v\n%s", err, out)
	}
	out, err = runCmd(t, newRootCmd(), "", "econ", "verify", "--store", url, "--json")
	var res struct {
		Intact   bool   `json:"intact"`
		Postings int64  `json:"postings"`
		Accounts int    `json:"accounts"`
		HeadHash string `json:"head_hash"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || !res.Intact || res.Postings != 3 || res.Accounts != 4 || len(res.HeadHash) != 64 {
		t.Fatalf("verify --json: %v, %+v\n%s", err, res, out)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE ledger_entries SET amount = 300 WHERE posting_id = 'buy-1' AND idx = 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	out, err = runCmd(t, newRootCmd(), "", "econ", "verify", "--store", url)
	var brk *netting.LedgerChainBrokenError
	if !errors.As(err, &brk) || errcode.Of(err) != netting.CodeLedgerChainBroken || brk.Seq != 1 || brk.PostingID != "buy-1" {
		t.Fatalf("verify of a tampered ledger: %v", err)
	}
	for _, want := range []string{"break             tampered\n", "seq               1\n", "posting           buy-1\n", "verify: BROKEN (LEDGER.CHAIN_BROKEN)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _ = runCmd(t, newRootCmd(), "", "econ", "verify", "--store", url, "--json")
	var broken struct {
		Intact bool `json:"intact"`
		Break  struct {
			Code, Kind, Posting string
			Seq                 int64
		} `json:"break"`
	}
	if json.Unmarshal([]byte(out), &broken) != nil || broken.Intact || broken.Break.Code != "LEDGER.CHAIN_BROKEN" || broken.Break.Kind != "tampered" || broken.Break.Seq != 1 || broken.Break.Posting != "buy-1" {
		t.Errorf("verify --json of a tampered ledger: %+v\n%s", broken, out)
	}

	// As a process: exit status 1, the code on stderr.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := shardwiseCommand(t, ctx, "econ", "verify", "--store", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	_, err = cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "shardwise: LEDGER.CHAIN_BROKEN: econ verify: ") {
		t.Errorf("shardwise econ verify of a tampered ledger: %v, stderr %q", err, stderr.String())
	}
}

func TestEconVerifyFlags(t *testing.T) {
	for _, args := range [][]string{
		{"econ", "verify"},
		{"econ", "verify", "--store", "sqlite://" + filepath.Join(t.TempDir(), "none.db")},
		{"econ", "verify", "--store", "mysql://x"},
	} {
		_, err := runCmd(t, newRootCmd(), "", args...)
		if errcode.Of(err) != errcode.ConfigInvalid || !strings.Contains(err.Error(), "--store") {
			t.Errorf("%v: %v, want CONFIG.INVALID naming --store", args, err)
		}
	}
}
