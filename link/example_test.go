package link_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardwise/shardwise/link"
)

// Two nodes from one cluster CA: b answers kind 1, a calls it. The sender's
// name comes from its certificate.
func Example() {
	ca, _ := link.NewCA("example", time.Now(), time.Hour)
	node := func(id string) *link.Node {
		nc, _ := ca.Issue(id, time.Now(), time.Hour)
		cert, _ := nc.TLSCertificate()
		n, err := link.New(link.Config{Certificate: cert, ClusterCA: ca.Pool()})
		if err != nil {
			panic(err)
		}
		return n
	}
	a, b := node("a"), node("b")
	defer a.Close()
	defer b.Close()
	b.Handle(1, func(_ context.Context, from string, p []byte) ([]byte, error) {
		return []byte(from + " said " + string(p)), nil
	})
	addr, _ := b.Listen("127.0.0.1:0")
	_ = a.AddPeer("b", addr.String())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := a.Call(ctx, "b", 1, []byte("hello"))
	fmt.Println(string(reply), err)
	// Output: a said hello <nil>
}
