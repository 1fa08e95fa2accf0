package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/gateway"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/zone/zonecli"
)

// defaultCluster is the cluster id tokens name and gateways accept when
// no --cluster is given (the same default as "shardwise certs" and the
// zone command's --cluster).
const defaultCluster = zonecli.DefaultCluster

// newTokenCmd is "shardwise token": login tokens for accounts, signed
// with the login key, and "token keygen", which makes the key pair.
func newTokenCmd() *cobra.Command {
	var (
		keyFile  string
		cluster  string
		accounts string
		audience string
		ttl      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue login tokens for accounts with the login key (\"token keygen\" makes the key pair)",
		Long: "token prints one login token per line, one for each account of --account\n" +
			"(an account, or a range FIRST-LAST, in order), for the gateways of cluster\n" +
			"--cluster, valid for --ttl. A token is single use: a client presents it once,\n" +
			"to any gateway of the cluster. It is signed with the Ed25519 private key in\n" +
			"--key (PKCS#8 PEM, as \"shardwise token keygen\" writes it or as\n" +
			"\"openssl genpkey -algorithm ed25519\" does); the zone nodes hold only the\n" +
			"public key (\"shardwise zone --login-pub\").\n" +
			"\n" +
			"--audience names the kind of service the tokens are for: \"gateway\" (the\n" +
			"default) is the only one a zone node's gateway accepts; a token for another\n" +
			"audience is refused there (TOKEN.WRONG_AUDIENCE) and is for a service of your\n" +
			"own that verifies tokens with logintoken.Verifier and that audience. A range\n" +
			"holds at most 10000 accounts; Ctrl-C stops the printing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			first, last, err := parseAccounts(accounts)
			if err != nil {
				return errcode.WithCode(err)
			}
			if n := uint64(last-first) + 1; n > maxTokens {
				return errcode.WithCode(errcode.Config("--account", accounts, fmt.Sprintf("a range of %d accounts: at most %d at once (issue several ranges)", n, maxTokens)))
			}
			if audience == "" || len(audience) > logintoken.MaxAudienceLen {
				return errcode.WithCode(errcode.Config("--audience", audience, fmt.Sprintf("must be 1..%d bytes (a gateway accepts %q)", logintoken.MaxAudienceLen, gateway.Audience)))
			}
			if ttl <= 0 || ttl > logintoken.DefaultMaxLifetime {
				return errcode.WithCode(errcode.Config("--ttl", ttl, fmt.Sprintf("must be positive and at most %v (the longest lifetime a gateway accepts)", logintoken.DefaultMaxLifetime)))
			}
			key, err := readLoginKey("--key", keyFile)
			if err != nil {
				return errcode.WithCode(err)
			}
			iss, err := logintoken.NewIssuer(logintoken.IssuerConfig{Cluster: cluster, Key: key, TTL: ttl})
			if err != nil {
				return errcode.WithCode(errcode.RenameFields(err, map[string]string{"Cluster": "--cluster"}))
			}
			out := cmd.OutOrStdout()
			ctx := cmd.Context()
			for a := first; ; a++ {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("token: stopped after %d of %d tokens: %w", a-first, last-first+1, context.Cause(ctx))
				}
				tok, _, err := iss.Issue(a, audience)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, tok)
				if a == last {
					return nil
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the login private key, PKCS#8 PEM (required; see \"token keygen\")")
	f.StringVar(&cluster, "cluster", defaultCluster, "the cluster id the tokens name (the gateways' --cluster)")
	f.StringVar(&accounts, "account", "", "an account (7) or a range of accounts (1-100): one token each (required)")
	f.DurationVar(&ttl, "ttl", logintoken.DefaultTTL, "how long each token is valid, at most 10m")
	f.StringVar(&audience, "audience", gateway.Audience, `the audience the tokens name: "gateway" for the zone nodes' gateways, or your own service's`)
	cmd.AddCommand(newTokenKeygenCmd())
	return cmd
}

// maxTokens bounds one --account range: a million tokens is a typo, not
// a batch (and each is single use and lives minutes).
const maxTokens = 10000

// newTokenKeygenCmd is "shardwise token keygen": the login key pair.
func newTokenKeygenCmd() *cobra.Command {
	var keyFile, pubFile string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Create the login key pair: the private key for \"token\", the public key for the zone nodes",
		Long: "keygen creates an Ed25519 key pair: --key gets the private key (PKCS#8 PEM,\n" +
			"mode 0600), for whoever issues tokens (\"shardwise token\", \"shardwise bots\");\n" +
			"--pub gets the public key (PKIX PEM), for every zone node (\"shardwise zone\n" +
			"--login-pub\"). Existing files are never overwritten.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyFile == "" {
				return errcode.WithCode(errcode.Config("--key", keyFile, "required: the file to write the private key to"))
			}
			if pubFile == "" || pubFile == keyFile {
				return errcode.WithCode(errcode.Config("--pub", pubFile, "required: the file to write the public key to, not --key's"))
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			privDER, err := x509.MarshalPKCS8PrivateKey(priv)
			if err != nil {
				return err
			}
			pubDER, err := x509.MarshalPKIXPublicKey(pub)
			if err != nil {
				return err
			}
			if err := writeNewFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
				return errcode.WithCode(errcode.Config("--pub", pubFile, err.Error()))
			}
			if err := writeNewFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
				_ = os.Remove(pubFile)
				return errcode.WithCode(errcode.Config("--key", keyFile, err.Error()))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote the login private key to %s and its public key to %s (key id %s)\n",
				keyFile, pubFile, logintoken.KeyIDOf(pub))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "file to create for the private key (required)")
	cmd.Flags().StringVar(&pubFile, "pub", "", "file to create for the public key (required)")
	return cmd
}

// writeNewFile creates path with data; it never replaces a file.
func writeNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errors.New("exists: keygen never overwrites a key")
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseAccounts reads --account: "7" or "1-100".
func parseAccounts(s string) (first, last account.ID, err error) {
	if s == "" {
		return 0, 0, errcode.Config("--account", s, "required: an account (7) or a range (1-100)")
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if first, err = account.Parse(lo); err != nil {
		return 0, 0, errcode.Config("--account", s, "must be an account (7) or a range (1-100) of accounts from 1")
	}
	last = first
	if isRange {
		if last, err = account.Parse(hi); err != nil || last < first {
			return 0, 0, errcode.Config("--account", s, "must be a range FIRST-LAST of accounts from 1 with FIRST <= LAST")
		}
	}
	return first, last, nil
}

// readLoginKey reads the login private key (PKCS#8 PEM, Ed25519) from
// path, the value of flag.
func readLoginKey(flag, path string) (ed25519.PrivateKey, error) {
	b, err := readPEM(flag, path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(b)
	if err != nil {
		return nil, errcode.Config(flag, path, "not a PKCS#8 private key: "+err.Error())
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errcode.Config(flag, path, fmt.Sprintf("holds a %T, not an Ed25519 key", k))
	}
	return priv, nil
}

// readLoginPub reads the login public key (PKIX PEM, Ed25519) from path,
// the value of flag. A private key is refused: nodes hold only the
// public key.
func readLoginPub(flag, path string) (ed25519.PublicKey, error) {
	b, err := readPEM(flag, path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(b)
	if err != nil {
		return nil, errcode.Config(flag, path, "not a PKIX public key: "+err.Error())
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errcode.Config(flag, path, fmt.Sprintf("holds a %T, not an Ed25519 key", k))
	}
	return pub, nil
}

// readPEM returns the DER of the one PEM block of type want in path.
func readPEM(flag, path, want string) ([]byte, error) {
	if path == "" {
		return nil, errcode.Config(flag, path, "required: a key file (see \"shardwise token keygen\")")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errcode.Config(flag, path, err.Error())
	}
	blk, rest := pem.Decode(data)
	switch {
	case blk == nil:
		return nil, errcode.Config(flag, path, "holds no PEM block")
	case blk.Type != want && strings.Contains(blk.Type, "PRIVATE KEY") && want == "PUBLIC KEY":
		return nil, errcode.Config(flag, path, "holds a private key: give the nodes only the public key (keygen's --pub)")
	case blk.Type != want:
		return nil, errcode.Config(flag, path, fmt.Sprintf("holds a %q PEM block, want %q", blk.Type, want))
	case len(strings.TrimSpace(string(rest))) != 0:
		return nil, errcode.Config(flag, path, "holds more than one PEM block")
	}
	return blk.Bytes, nil
}
