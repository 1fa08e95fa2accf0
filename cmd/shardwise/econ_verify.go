package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/internal/dburl"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/netting/sqlstore"
)

// newEconVerifyCmd is "shardwise econ verify": the proof of a store's
// ledger (netting.VerifyLedger).
func newEconVerifyCmd() *cobra.Command {
	var (
		storeURL string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Prove an economy store's ledger: walk the postings' hash chain and check every posting and balance against it",
		Long: "verify reads the store --store (sqlite:///PATH or postgres://…) and proves its\n" +
			"ledger: every posting is chained after the one committed before it, with a\n" +
			"hash over its id, legs, meta and time. It walks the chain from the first\n" +
			"posting and checks that none is missing or out of place, that each hash\n" +
			"matches its posting, that the chain's head is the last posting and no\n" +
			"posting is outside the chain, and that every stored balance equals the sum\n" +
			"of the postings' legs. It prints the head it proved (the number of postings\n" +
			"and the last one's hash) or the first break: the posting tampered with,\n" +
			"missing or reordered, or the balance that disagrees, with exit status 1\n" +
			"(code LEDGER.CHAIN_BROKEN). It writes nothing to the ledger and may run\n" +
			"while the cluster runs; like every opener of the store it first applies\n" +
			"pending schema migrations (an older database gets its postings chained, in\n" +
			"the order they were posted).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, err := openExistingStore(ctx, storeURL)
			if err != nil {
				return errcode.WithCode(err)
			}
			defer store.Close()
			proof, err := netting.VerifyLedger(ctx, store)
			var brk *netting.LedgerChainBrokenError
			if err != nil && !errors.As(err, &brk) {
				return errcode.WithCode(err)
			}
			if asJSON {
				if err := printVerifyJSON(cmd.OutOrStdout(), proof, brk); err != nil {
					return err
				}
			} else {
				printVerify(cmd.OutOrStdout(), proof, brk)
			}
			if brk != nil {
				return errcode.WithCode(fmt.Errorf("econ verify: %w", brk))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&storeURL, "store", "", "the economy store: sqlite:///PATH or postgres://… (required)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// openExistingStore opens the store --store names, refusing a SQLite path
// with no database (opening would create an empty one and prove that).
func openExistingStore(ctx context.Context, storeURL string) (*sqlstore.Store, error) {
	if storeURL == "" {
		return nil, errcode.Config("--store", storeURL, "required: sqlite:///PATH or postgres://…")
	}
	kind, path, err := dburl.Parse("--store", storeURL)
	if err != nil {
		return nil, err
	}
	if kind == dburl.SQLite {
		if _, err := os.Stat(path); err != nil {
			return nil, errcode.Config("--store", storeURL, "names no SQLite database: "+err.Error())
		}
	}
	store, err := sqlstore.Open(ctx, storeURL)
	if err != nil {
		return nil, errcode.RenameFields(err, map[string]string{"url": "--store"})
	}
	return store, nil
}

func printVerify(w io.Writer, p netting.LedgerProof, brk *netting.LedgerChainBrokenError) {
	if brk != nil {
		fmt.Fprintf(w, "break             %s\n", brk.Kind)
		if brk.Seq >= 0 {
			fmt.Fprintf(w, "seq               %d\n", brk.Seq)
		}
		if brk.PostingID != "" {
			fmt.Fprintf(w, "posting           %s\n", brk.PostingID)
		}
		if brk.Account != "" {
			fmt.Fprintf(w, "account           %s\n", brk.Account)
		}
		fmt.Fprintf(w, "reason            %s\n", brk.Reason)
		fmt.Fprintf(w, "verify: BROKEN (%s)\n", netting.CodeLedgerChainBroken)
		return
	}
	fmt.Fprintf(w, "postings          %d\n", p.Head.Len)
	fmt.Fprintf(w, "accounts          %d\n", p.Accounts)
	if p.Head.Len == 0 {
		fmt.Fprintf(w, "head              genesis %s\n", p.Head.Hash)
	} else {
		fmt.Fprintf(w, "head              seq %d hash %s\n", p.Head.Len-1, p.Head.Hash)
	}
	fmt.Fprintln(w, "verify: intact")
}

func printVerifyJSON(w io.Writer, p netting.LedgerProof, brk *netting.LedgerChainBrokenError) error {
	type finding struct {
		Code      string `json:"code"`
		Kind      string `json:"kind"`
		Seq       int64  `json:"seq"`
		PostingID string `json:"posting,omitempty"`
		Account   string `json:"account,omitempty"`
		Reason    string `json:"reason"`
	}
	out := struct {
		Intact   bool     `json:"intact"`
		Postings int64    `json:"postings"`
		Accounts int      `json:"accounts"`
		HeadHash string   `json:"head_hash,omitempty"`
		Break    *finding `json:"break,omitempty"`
	}{Intact: brk == nil}
	if brk == nil {
		out.Postings, out.Accounts, out.HeadHash = p.Head.Len, p.Accounts, p.Head.Hash
	} else {
		out.Break = &finding{Code: netting.CodeLedgerChainBroken, Kind: brk.Kind, Seq: brk.Seq, PostingID: brk.PostingID, Account: brk.Account, Reason: brk.Reason}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
