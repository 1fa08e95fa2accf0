package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/nodename"
)

// newCertsCmd is "shardwise certs": a cluster CA and one certificate per
// node, for running a cluster on one machine with mutual TLS on the link.
func newCertsCmd() *cobra.Command {
	var (
		dir      string
		nodes    []string
		cluster  string
		validity time.Duration
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a cluster CA and a certificate per node for the node link (one machine)",
		Long: "certs creates --dir holding ca.pem (the cluster CA certificate) and, for\n" +
			"each node id in --nodes, <id>.cert.pem and <id>.key.pem: an ECDSA P-256\n" +
			"certificate valid as TLS server and client for 127.0.0.1, ::1 and\n" +
			"localhost, naming the node in its CN and in the URI SAN\n" +
			"shardwise://node/<id>. Nodes take a peer's id from that certificate.\n" +
			"The CA key is not kept: to add a node, create a new directory for the\n" +
			"whole cluster. Existing files are never overwritten.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return withCode(errcode.Config("--dir", dir, "a directory is required"))
			}
			if len(nodes) == 0 {
				return withCode(errcode.Config("--nodes", "", "at least one node id is required"))
			}
			for i, id := range nodes {
				if err := nodename.Check("--nodes", id); err != nil {
					return withCode(err)
				}
				if slices.Contains(nodes[:i], id) {
					return withCode(errcode.Config("--nodes", strings.Join(nodes, ","), "lists "+strconv.Quote(id)+" twice"))
				}
			}
			// Checked before anything is written: a refusal halfway would
			// leave a CA whose key is gone beside some nodes' certificates.
			files := []string{link.CAFile}
			for _, id := range nodes {
				files = append(files, link.NodeCertFile(id), link.NodeKeyFile(id))
			}
			for _, name := range files {
				if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
					return withCode(errcode.Config("--dir", dir, "already holds "+name+": certs never overwrites a file; write the cluster's certificates to a new directory"))
				}
			}
			if validity <= 0 {
				return withCode(errcode.Config("--validity", validity, "must be positive"))
			}
			if err := link.WriteClusterCerts(dir, cluster, nodes, time.Now(), validity); err != nil {
				return withCode(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and certificates for %s to %s\n", link.CAFile, strings.Join(nodes, ", "), dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to create (required)")
	cmd.Flags().StringSliceVar(&nodes, "nodes", nil, "comma-separated node ids (required)")
	cmd.Flags().StringVar(&cluster, "cluster", "local", "cluster name written into the CA's subject")
	cmd.Flags().DurationVar(&validity, "validity", 365*24*time.Hour, "how long the certificates are valid")
	return cmd
}
