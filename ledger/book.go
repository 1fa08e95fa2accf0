package ledger

import "maps"

// Book is an in-memory ledger that applies every rule of this package. It is
// not safe for concurrent use; a store wraps it in its own lock.
type Book struct {
	postings map[string]Posting
	balances map[string]int64
	order    []string
}

// NewBook returns an empty book.
func NewBook() *Book {
	return &Book{postings: map[string]Posting{}, balances: map[string]int64{}}
}

// Post validates p and applies it atomically. A posting id already in the
// book is a no-op returning nil (posted=false), whatever its legs: the id is
// the idempotency key. A refused posting changes nothing.
func (b *Book) Post(p Posting) (posted bool, err error) {
	if err := Validate(p); err != nil {
		return false, err
	}
	if _, ok := b.postings[p.ID]; ok {
		return false, nil
	}
	if err := CheckOverdraft(p.Legs, b.Balance); err != nil {
		return false, err
	}
	for _, l := range p.Legs {
		b.balances[l.Account] += l.BalanceDelta()
	}
	cp := Posting{ID: p.ID, Legs: append([]Leg(nil), p.Legs...), Meta: maps.Clone(p.Meta)}
	b.postings[p.ID] = cp
	b.order = append(b.order, p.ID)
	return true, nil
}

// Has reports whether a posting id is in the book.
func (b *Book) Has(id string) bool { _, ok := b.postings[id]; return ok }

// Get returns a copy of the posting with id.
func (b *Book) Get(id string) (Posting, bool) {
	p, ok := b.postings[id]
	if !ok {
		return Posting{}, false
	}
	return Posting{ID: p.ID, Legs: append([]Leg(nil), p.Legs...), Meta: maps.Clone(p.Meta)}, true
}

// Balance returns credits minus debits of account (0 if never touched).
func (b *Book) Balance(account string) int64 { return b.balances[account] }

// Balances returns a copy of every touched account's balance.
func (b *Book) Balances() map[string]int64 { return maps.Clone(b.balances) }

// Len returns the number of postings in the book.
func (b *Book) Len() int { return len(b.order) }

// IDs returns the posting ids in the order they were posted.
func (b *Book) IDs() []string { return append([]string(nil), b.order...) }
