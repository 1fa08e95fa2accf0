package main

import (
	"fmt"
	"slices"
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
		sans     []string
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a cluster CA and a certificate per node for the node link (one machine)",
		Long: "certs creates --dir holding ca.pem (the cluster CA certificate) and, for\n" +
			"each node id in --nodes, <id>.cert.pem and <id>.key.pem: an ECDSA P-256\n" +
			"certificate valid as TLS server and client for 127.0.0.1, ::1 and\n" +
			"localhost, naming the node in its CN and in the URI SAN\n" +
			"shardwise://node/<id>. Nodes take a peer's id from that certificate.\n" +
			"--san NODE=HOST[,HOST…] (repeatable) adds the DNS names and IP addresses\n" +
			"NODE is reached at on other machines: a peer verifies that the certificate\n" +
			"names the host of the address the node advertises (--advertise).\n" +
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
			for _, id := range nodes {
				if err := nodename.Check("--nodes", id); err != nil {
					return withCode(err)
				}
			}
			hosts, err := parseSANs(sans, nodes)
			if err != nil {
				return withCode(err)
			}
			if validity <= 0 {
				return withCode(errcode.Config("--validity", validity, "must be positive"))
			}
			if err := link.WriteClusterCertsWithHosts(dir, cluster, nodes, hosts, time.Now(), validity); err != nil {
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
	cmd.Flags().StringArrayVar(&sans, "san", nil, "NODE=HOST[,HOST…]: DNS names and IP addresses NODE's certificate also names (repeatable)")
	return cmd
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
