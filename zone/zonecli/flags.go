package zonecli

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
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
