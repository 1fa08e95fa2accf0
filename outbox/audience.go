package outbox

import "github.com/shardwise/shardwise/interest"

// AudienceKind is who may receive a component.
type AudienceKind uint8

// Audience kinds.
const (
	// PublicInRange: every subscriber that sees the entity.
	PublicInRange AudienceKind = iota + 1
	// OwnerOnly: the entity's owning account and nobody else, wherever it
	// stands (routed by account, not by sight). An entity with no owner has
	// no audience for it.
	OwnerOnly
	// Accounts: an explicit set of accounts.
	Accounts
	// OwnerAndParty: the owning account and the members of its party.
	OwnerAndParty
)

// String names the kind.
func (k AudienceKind) String() string {
	switch k {
	case PublicInRange:
		return "public-in-range"
	case OwnerOnly:
		return "owner-only"
	case Accounts:
		return "accounts"
	case OwnerAndParty:
		return "owner-and-party"
	}
	return "unknown"
}

// Audience is the audience of one component of one entity at one flush.
type Audience[S comparable] struct {
	Kind AudienceKind
	// Members is the account set of an Accounts audience.
	Members []S
}

// Public returns the PublicInRange audience.
func Public[S comparable]() Audience[S] { return Audience[S]{Kind: PublicInRange} }

// Owner returns the OwnerOnly audience.
func Owner[S comparable]() Audience[S] { return Audience[S]{Kind: OwnerOnly} }

// Party returns the OwnerAndParty audience.
func Party[S comparable]() Audience[S] { return Audience[S]{Kind: OwnerAndParty} }

// AccountSet returns the Accounts audience of members.
func AccountSet[S comparable](members ...S) Audience[S] {
	return Audience[S]{Kind: Accounts, Members: members}
}

// World is what the outbox asks about entities at flush. The game
// implements it over its ecs world and interest.Visibility.
type World[S comparable, E interest.Entity] interface {
	// AppendObserversOf appends the subscribers that see e
	// (interest.Visibility has this method).
	AppendObserversOf(dst []S, e E) []S
	// OwnerOf returns the account that owns e, if any.
	OwnerOf(e E) (S, bool)
	// AppendParty appends the party members of owner, owner excluded.
	AppendParty(dst []S, owner S) []S
}

// Encoder encodes one synced component type.
type Encoder[S comparable, E interest.Entity] interface {
	// Type is the component's wire type.
	Type() ComponentType
	// Has reports whether e has the component now.
	Has(e E) bool
	// Audience says who may receive e's component, evaluated at flush.
	Audience(e E) Audience[S]
	// AppendPayload appends the component's encoded value for e.
	AppendPayload(dst []byte, e E) []byte
}

// EncoderFuncs adapts functions to an Encoder. A nil HasFunc means every
// entity has the component.
type EncoderFuncs[S comparable, E interest.Entity] struct {
	WireType     ComponentType
	HasFunc      func(e E) bool
	AudienceFunc func(e E) Audience[S]
	PayloadFunc  func(dst []byte, e E) []byte
}

// Type implements Encoder.
func (f EncoderFuncs[S, E]) Type() ComponentType { return f.WireType }

// Has implements Encoder.
func (f EncoderFuncs[S, E]) Has(e E) bool { return f.HasFunc == nil || f.HasFunc(e) }

// Audience implements Encoder.
func (f EncoderFuncs[S, E]) Audience(e E) Audience[S] { return f.AudienceFunc(e) }

// AppendPayload implements Encoder.
func (f EncoderFuncs[S, E]) AppendPayload(dst []byte, e E) []byte { return f.PayloadFunc(dst, e) }

// IndexedWorld is an optional fast path of World. When the World passed to
// New implements it, public components are fanned out through dense
// subscriber indices, and the outbox turns an index into its recipient
// through a slice instead of hashing the subscriber key once per observer
// per message. interest.Visibility implements it.
type IndexedWorld[S comparable, E interest.Entity] interface {
	// AppendObserverIndices appends the dense indices of the subscribers
	// that see e: the same subscribers AppendObserversOf names.
	AppendObserverIndices(dst []int32, e E) []int32
	// SubscriberAt returns the key of dense index i. An index may be given
	// to another key after its subscriber is forgotten, so the outbox
	// checks the key before trusting what it cached for the index.
	SubscriberAt(i int32) S
	// SubscriberEpoch changes whenever an index is given to a key or taken
	// from one. While it is unchanged the outbox trusts what it cached for
	// an index without asking SubscriberAt again (one interface call and
	// key comparison per observer per message saved).
	SubscriberEpoch() uint64
}
