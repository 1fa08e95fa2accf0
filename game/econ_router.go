package game

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/netting"
)

// CodeNoEconomyNode is the code of ErrNoEconomyNode.
const CodeNoEconomyNode = "GAME.NO_ECONOMY_NODE"

// ErrNoEconomyNode: every economy node a NodeRouter was given is closed.
// The game retries it like any outcome it does not know.
var ErrNoEconomyNode = errcode.New(CodeNoEconomyNode, "game: no economy node is running")

// NodeRouter is the Economy of economy nodes running in this process (the
// tests, a demo): it sends a movement to the node that owns its scope
// among the nodes still running, by the placement the nodes use
// (netting.ScopeRouter over their names), and follows a misroute to the
// owner it names. Over the network, econ's gRPC client does the same.
// It keeps no state of its own; safe for concurrent use.
type NodeRouter struct{ nodes []*econ.Node }

var (
	_ Economy       = (*NodeRouter)(nil)
	_ EconomyReader = (*NodeRouter)(nil)
	_ Economy       = (*econ.Node)(nil)
)

// NewNodeRouter routes over nodes (which it does not close).
func NewNodeRouter(nodes ...*econ.Node) *NodeRouter {
	return &NodeRouter{nodes: append([]*econ.Node(nil), nodes...)}
}

// maxRedirects bounds the misroutes one Record follows: views that differ
// for a moment redirect once or twice.
const maxRedirects = 3

// Record records m under scope on its owner. An error is the last node's
// (ECON.NOT_READY while the nodes re-form, a misroute past maxRedirects),
// or ErrNoEconomyNode: the caller retries with the same key.
func (r *NodeRouter) Record(ctx context.Context, scope string, m netting.Movement) (netting.Outcome, error) {
	live := r.live()
	if len(live) == 0 {
		return netting.Outcome{}, ErrNoEconomyNode
	}
	names := make([]string, len(live))
	for i, n := range live {
		names[i] = n.Name()
	}
	owner, err := netting.ScopeRouter(names)
	if err != nil {
		return netting.Outcome{}, err
	}
	at := owner(scope)
	for hop := 0; ; hop++ {
		n := r.named(live, at)
		out, err := n.Record(ctx, scope, m)
		var mis *netting.MisroutedError
		if !errors.As(err, &mis) || hop == maxRedirects || mis.Owner == at || r.named(live, mis.Owner) == nil {
			return out, err
		}
		at = mis.Owner
	}
}

// Holdings reads what each account can spend now from the nodes' shared
// store: its balance plus its pending reservations, read one after the
// other (a settle between the two reads can show a change twice or not
// at all until the next read: a view, not an audit).
func (r *NodeRouter) Holdings(ctx context.Context, accounts []string) ([]int64, error) {
	live := r.live()
	if len(live) == 0 {
		return nil, ErrNoEconomyNode
	}
	st := live[0].Store()
	out := make([]int64, len(accounts))
	for i, a := range accounts {
		b, err := st.Balance(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("game: balance of %s: %w", a, err)
		}
		p, err := st.Pending(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("game: pending of %s: %w", a, err)
		}
		out[i] = b + p
	}
	return out, nil
}

func (r *NodeRouter) live() []*econ.Node {
	var live []*econ.Node
	for _, n := range r.nodes {
		if st := n.Status(); !st.Closed && !st.Fenced {
			live = append(live, n)
		}
	}
	return live
}

func (r *NodeRouter) named(live []*econ.Node, name string) *econ.Node {
	for _, n := range live {
		if n.Name() == name {
			return n
		}
	}
	return nil
}

// ClientEconomy is the Economy of econ's gRPC client, with its reading
// side: what Config.Economy.Ledger takes for a cluster of economy
// processes.
type ClientEconomy struct{ *econ.Client }

var _ EconomyReader = ClientEconomy{}

// Holdings reads the accounts' balances plus pending reservations.
func (c ClientEconomy) Holdings(ctx context.Context, accounts []string) ([]int64, error) {
	bs, err := c.Balances(ctx, accounts...)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.Balance + b.Pending
	}
	return out, nil
}
