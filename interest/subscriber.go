package interest

import (
	"strconv"

	"github.com/shardwise/shardwise/account"
)

// SubscriberKind tells what a Subscriber key stands for.
type SubscriberKind uint8

// Subscriber kinds.
const (
	// AccountSubscriber is a client's account, served by a local socket.
	AccountSubscriber SubscriberKind = iota + 1
	// NodeSubscriber is another node that observes chunks this node owns.
	NodeSubscriber
)

// Subscriber is a ready-made subscription key for a world that has both
// account and node subscribers: Subscriptions[Subscriber]. A world with
// only accounts may use account.ID itself.
type Subscriber struct {
	Kind SubscriberKind
	// ID is the account.ID of an AccountSubscriber or the node id of a
	// NodeSubscriber, as a uint64 so that one comparable key holds either.
	ID uint64
}

// Account returns the key of account id.
func Account(id account.ID) Subscriber { return Subscriber{Kind: AccountSubscriber, ID: uint64(id)} }

// Account returns the account s stands for, and false when s is not an
// account subscriber.
func (s Subscriber) Account() (account.ID, bool) {
	if s.Kind != AccountSubscriber {
		return account.None, false
	}
	return account.ID(s.ID), true
}

// Node returns the key of node id.
func Node(id uint64) Subscriber { return Subscriber{Kind: NodeSubscriber, ID: id} }

// String renders the key as "account:7" or "node:3".
func (s Subscriber) String() string {
	switch s.Kind {
	case AccountSubscriber:
		return "account:" + strconv.FormatUint(s.ID, 10)
	case NodeSubscriber:
		return "node:" + strconv.FormatUint(s.ID, 10)
	}
	return "subscriber(" + strconv.Itoa(int(s.Kind)) + "):" + strconv.FormatUint(s.ID, 10)
}
