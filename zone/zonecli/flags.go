package zonecli

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/errcode"
)

// The helpers below are cmd/shardwise's, which the other commands keep
// using there: a copy, as package main cannot be imported.

// etcdFlags are the connection flags of every etcd-facing command.
type etcdFlags struct {
	endpoints []string
	prefix    string
	timeout   time.Duration
}

func (f *etcdFlags) register(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringSliceVar(&f.endpoints, "endpoints", nil,
		"etcd client URLs, comma-separated (for example http://127.0.0.1:2379); required")
	fs.StringVar(&f.prefix, "prefix", coord.DefaultPrefix,
		"key prefix of the shardwise cluster in etcd")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second,
		"give up on etcd after this long")
}

// codedError puts an error's stable code in front of its message, so an
// operator (or a script reading stderr) sees CONFIG.INVALID and not only
// prose.
type codedError struct{ err error }

func (e codedError) Error() string { return errcode.Of(e.err) + ": " + e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

func withCode(err error) error {
	if err == nil || errcode.Of(err) == "" {
		return err
	}
	return codedError{err}
}

// renameToFlags returns a configuration error about a field that a flag
// sets as the same error about that flag. Other errors are returned
// unchanged.
func renameToFlags(err error, flagOf map[string]string) error {
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	flag, ok := flagOf[ce.Field]
	if !ok {
		return err
	}
	return errcode.Config(flag, ce.Value, ce.Reason)
}

// indexRE matches the index of a list field ("Endpoints[2]").
var indexRE = regexp.MustCompile(`\[\d+\]$`)

// indexless returns a configuration error about one element of a list
// field as the same error about the field, whose flag takes the list.
func indexless(err error) error {
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) || !indexRE.MatchString(ce.Field) {
		return err
	}
	return errcode.Config(indexRE.ReplaceAllString(ce.Field, ""), ce.Value, ce.Reason)
}

// readLoginPub reads the login public key (PKIX PEM, Ed25519) from path,
// the value of flag. A private key is refused: nodes hold only the
// public key.
func readLoginPub(flag, path string) (ed25519.PublicKey, error) {
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
	case strings.Contains(blk.Type, "PRIVATE KEY"):
		return nil, errcode.Config(flag, path, "holds a private key: give the nodes only the public key (keygen's --pub)")
	case blk.Type != "PUBLIC KEY":
		return nil, errcode.Config(flag, path, fmt.Sprintf("holds a %q PEM block, want %q", blk.Type, "PUBLIC KEY"))
	case len(strings.TrimSpace(string(rest))) != 0:
		return nil, errcode.Config(flag, path, "holds more than one PEM block")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, errcode.Config(flag, path, "not a PKIX public key: "+err.Error())
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errcode.Config(flag, path, fmt.Sprintf("holds a %T, not an Ed25519 key", k))
	}
	return pub, nil
}
