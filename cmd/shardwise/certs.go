package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/nodename"
)

// newCertsCmd is "shardwise certs": a cluster CA and one certificate per
// node for mutual TLS between nodes; with the CA key kept (--ca-key), nodes
// added to it and certificates rotated later.
func newCertsCmd() *cobra.Command {
	var (
		dir      string
		nodes    []string
		cluster  string
		validity time.Duration
		sans     []string
		caKey    string
		rotate   bool
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a cluster CA and a certificate per node, add nodes to it, rotate a node's certificate",
		Long: "certs creates --dir holding ca.pem (the cluster CA certificate) and, for\n" +
			"each node id in --nodes, <id>.cert.pem and <id>.key.pem: an ECDSA P-256\n" +
			"certificate valid as TLS server and client for 127.0.0.1, ::1 and\n" +
			"localhost, naming the node in its CN and in the URI SAN\n" +
			"shardwise://node/<id>. Nodes take a peer's id from that certificate.\n" +
			"--san NODE=HOST[,HOST…] (repeatable) adds the DNS names and IP addresses\n" +
			"NODE is reached at on other machines: a peer verifies that the certificate\n" +
			"names the host of the address the node advertises (--advertise).\n" +
			"\n" +
			"Without --ca-key the CA key is not kept: to add a node, create a new\n" +
			"directory for the whole cluster. With --ca-key FILE it is written to FILE\n" +
			"(mode 0600, outside --dir, which the nodes read: whoever holds it can make\n" +
			"certificates the whole cluster trusts). Given a --dir that holds ca.pem\n" +
			"already and its --ca-key, certs adds the --nodes to that CA, leaving the\n" +
			"other nodes' files alone, and with --rotate gives each of the --nodes a new\n" +
			"key and certificate, replacing its files (naming the hosts the old one\n" +
			"named, unless --san gives others). Running nodes read their\n" +
			"certificate again at every new connection, so a rotated one is used\n" +
			"without a restart. Other existing files are never overwritten.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errcode.WithCode(errcode.Config("--dir", dir, "a directory is required"))
			}
			if len(nodes) == 0 {
				return errcode.WithCode(errcode.Config("--nodes", "", "at least one node id is required"))
			}
			for i, id := range nodes {
				if err := nodename.Check("--nodes", id); err != nil {
					return errcode.WithCode(err)
				}
				if slices.Contains(nodes[:i], id) {
					return errcode.WithCode(errcode.Config("--nodes", strings.Join(nodes, ","), fmt.Sprintf("names %s twice", id)))
				}
			}
			hosts, err := parseSANs(sans, nodes)
			if err != nil {
				return errcode.WithCode(err)
			}
			if validity <= 0 {
				return errcode.WithCode(errcode.Config("--validity", validity, "must be positive"))
			}
			now := time.Now()
			out := cmd.OutOrStdout()
			_, err = os.Stat(filepath.Join(dir, link.CAFile))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				if rotate {
					return errcode.WithCode(errcode.Config("--rotate", rotate, fmt.Sprintf("--dir %s holds no %s: there is nothing to rotate", dir, link.CAFile)))
				}
				ca, err := link.NewCA(cluster, now, validity)
				if err != nil {
					return err
				}
				if err := link.WriteCA(dir, ca, caKey); err != nil {
					var ce *errcode.ConfigError
					if errors.As(err, &ce) || caKey != "" && errors.Is(err, fs.ErrExist) {
						return errcode.WithCode(errcode.Config("--ca-key", caKey, err.Error()))
					}
					return errcode.WithCode(err)
				}
				if err := link.WriteNodeCerts(dir, ca, nodes, hosts, false, now, validity); err != nil {
					return errcode.WithCode(err)
				}
				fmt.Fprintf(out, "wrote %s and certificates for %s to %s\n", link.CAFile, strings.Join(nodes, ", "), dir)
				if caKey != "" {
					fmt.Fprintf(out, "wrote the CA key to %s: keep it out of what the nodes read; add nodes and rotate certificates with it\n", caKey)
				}
				return nil
			case err != nil:
				return errcode.WithCode(errcode.Config("--dir", dir, err.Error()))
			}
			if caKey == "" {
				return errcode.WithCode(errcode.Config("--ca-key", caKey, fmt.Sprintf("required: --dir %s holds a cluster CA already, and adding nodes to it or rotating their certificates needs its key (kept with --ca-key when the CA was made)", dir)))
			}
			ca, err := loadCA(dir, caKey)
			if err != nil {
				return errcode.WithCode(err)
			}
			if err := link.WriteNodeCerts(dir, ca, nodes, hosts, rotate, now, validity); err != nil {
				return errcode.WithCode(errcode.Config("--nodes", strings.Join(nodes, ","), err.Error()))
			}
			verb := "added certificates for"
			if rotate {
				verb = "rotated the certificates of"
			}
			fmt.Fprintf(out, "%s %s in %s (the other nodes' files are unchanged)\n", verb, strings.Join(nodes, ", "), dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to create, or holding the CA to add nodes to (required)")
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "comma-separated node ids (required)")
	cmd.Flags().StringVar(&cluster, "cluster", "local", "cluster name written into the CA's subject")
	cmd.Flags().DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificates are valid (a node's, at most as long as the CA's)")
	cmd.Flags().StringArrayVar(&sans, "san", nil, "NODE=HOST[,HOST…]: DNS names and IP addresses NODE's certificate also names (repeatable)")
	cmd.Flags().StringVar(&caKey, "ca-key", "", "the CA key file: written (0600) when the CA is made, read to add nodes or rotate (default: the key is not kept)")
	cmd.Flags().BoolVar(&rotate, "rotate", false, "give the --nodes, which exist in --dir, a new key and certificate (needs --ca-key)")
	return cmd
}

// loadCA reads the CA of a certificate directory and its key file.
func loadCA(dir, keyFile string) (*link.CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, link.CAFile))
	if err != nil {
		return nil, errcode.Config("--dir", dir, err.Error())
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, errcode.Config("--ca-key", keyFile, err.Error())
	}
	ca, err := link.LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, errcode.Config("--ca-key", keyFile, fmt.Sprintf("not the key of %s in %s: %v", link.CAFile, dir, err))
	}
	return ca, nil
}

// parseSANs reads the --san values into the hosts of each node, refusing a
// node not in nodes and a host that cannot be a SAN.
func parseSANs(sans, nodes []string) (map[string][]string, error) {
	hosts := map[string][]string{}
	for _, v := range sans {
		node, list, ok := strings.Cut(v, "=")
		if !ok || list == "" {
			return nil, errcode.Config("--san", v, "must be NODE=HOST[,HOST…]")
		}
		if !slices.Contains(nodes, node) {
			return nil, errcode.Config("--san", v, "names a node that is not in --nodes")
		}
		for _, h := range strings.Split(list, ",") {
			if err := link.CheckHost("--san", h); err != nil {
				return nil, err
			}
			hosts[node] = append(hosts[node], h)
		}
	}
	return hosts, nil
}
