package ledger_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
)

func TestLegSigns(t *testing.T) {
	if l := ledger.Debit("a", 5); l.Amount != 5 || l.Account != "a" || l.BalanceDelta() != -5 {
		t.Errorf("Debit = %+v", l)
	}
	if l := ledger.Credit("a", 5); l.Amount != -5 || l.BalanceDelta() != 5 {
		t.Errorf("Credit = %+v", l)
	}
}

func TestIsWallet(t *testing.T) {
	for acct, want := range map[string]bool{
		"alice:spendable": true, "alice:earned": true, "alice:sess:1:escrow": true,
		"platform:revenue": false, "platform:netting_clearing": false, "platformx:y": true,
	} {
		if got := ledger.IsWallet(acct); got != want {
			t.Errorf("IsWallet(%s) = %v", acct, got)
		}
	}
	if ledger.Spendable("u") != "u:spendable" || ledger.Earned("u") != "u:earned" || ledger.Escrow("u", "s") != "u:s:escrow" {
		t.Error("account names")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		p    ledger.Posting
		code string
	}{
		{"ok", ledger.Posting{ID: "p", Legs: []ledger.Leg{ledger.Debit("a", 1), ledger.Credit("b", 1)}}, ""},
		{"empty id", ledger.Posting{Legs: []ledger.Leg{ledger.Debit("a", 1), ledger.Credit("b", 1)}}, ledger.CodeMalformed},
		{"no legs", ledger.Posting{ID: "p"}, ledger.CodeMalformed},
		{"zero", ledger.Posting{ID: "p", Legs: []ledger.Leg{{Account: "a"}}}, ledger.CodeMalformed},
		{"no account", ledger.Posting{ID: "p", Legs: []ledger.Leg{ledger.Debit("", 1), ledger.Credit("b", 1)}}, ledger.CodeMalformed},
		{"min int", ledger.Posting{ID: "p", Legs: []ledger.Leg{{Account: "a", Amount: math.MinInt64}}}, ledger.CodeMalformed},
		{"unbalanced", ledger.Posting{ID: "p", Legs: []ledger.Leg{ledger.Debit("a", 2), ledger.Credit("b", 1)}}, ledger.CodeUnbalanced},
		{"overflow", ledger.Posting{ID: "p", Legs: []ledger.Leg{ledger.Debit("a", math.MaxInt64), ledger.Debit("b", 1), ledger.Credit("c", 1)}}, ledger.CodeUnbalanced},
	}
	for _, c := range cases {
		err := ledger.Validate(c.p)
		if errcode.Of(err) != c.code {
			t.Errorf("%s: %v (code %q), want %q", c.name, err, errcode.Of(err), c.code)
		}
		if c.code == ledger.CodeMalformed && !errors.Is(err, ledger.ErrMalformed) {
			t.Errorf("%s: not ErrMalformed", c.name)
		}
		if c.code == ledger.CodeUnbalanced && !errors.Is(err, ledger.ErrUnbalanced) {
			t.Errorf("%s: not ErrUnbalanced", c.name)
		}
		if (c.code != "") != ledger.IsRefusal(err) {
			t.Errorf("%s: IsRefusal = %v", c.name, ledger.IsRefusal(err))
		}
	}
	if ledger.IsRefusal(errors.New("connection reset")) {
		t.Error("an infrastructure error counted as a refusal")
	}
}

func TestBookRules(t *testing.T) {
	b := ledger.NewBook()
	fund := ledger.Posting{ID: "fund", Legs: []ledger.Leg{ledger.Credit("alice:spendable", 100), ledger.Debit(ledger.Revenue, 100)}}
	if posted, err := b.Post(fund); !posted || err != nil {
		t.Fatalf("fund: %v %v", posted, err)
	}
	if posted, err := b.Post(fund); posted || err != nil {
		t.Errorf("repeat id: posted=%v err=%v, want a no-op", posted, err)
	}
	_, err := b.Post(ledger.Posting{ID: "big", Legs: []ledger.Leg{ledger.Debit("alice:spendable", 101), ledger.Credit("bob:earned", 101)}})
	var od *ledger.Overdraft
	if !errors.As(err, &od) || od.Account != "alice:spendable" || od.Balance != -1 || !errors.Is(err, ledger.ErrOverdraft) || errcode.Of(err) != "LEDGER.OVERDRAFT" {
		t.Errorf("overdraft: %v", err)
	}
	if b.Has("big") || b.Balance("bob:earned") != 0 {
		t.Error("a refused posting changed the book")
	}
	// A wallet already below zero (impossible through Post) is not this
	// posting's doing: only decreases are checked.
	if err := ledger.CheckOverdraft([]ledger.Leg{ledger.Credit("x:spendable", 1), ledger.Debit(ledger.Revenue, 1)}, func(string) int64 { return -5 }); err != nil {
		t.Errorf("credit to a negative wallet refused: %v", err)
	}
	if _, err := b.Post(ledger.Posting{ID: "buy", Legs: []ledger.Leg{ledger.Debit("alice:spendable", 100), ledger.Credit("bob:earned", 100)}}); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, v := range b.Balances() {
		sum += v
	}
	if sum != 0 || b.Balance("alice:spendable") != 0 || b.Balance("bob:earned") != 100 || b.Balance(ledger.Revenue) != -100 {
		t.Errorf("balances %v", b.Balances())
	}
	if b.Len() != 2 || fmt.Sprint(b.IDs()) != "[fund buy]" {
		t.Errorf("ids %v", b.IDs())
	}
	got, ok := b.Get("buy")
	if !ok || len(got.Legs) != 2 {
		t.Errorf("Get = %+v", got)
	}
}

func TestNetDeltas(t *testing.T) {
	d := ledger.NetDeltas([]ledger.Leg{ledger.Debit("a", 5), ledger.Credit("b", 3), ledger.Credit("a", 2), ledger.Credit("c", 0)})
	if fmt.Sprint(d) != "[{a -3} {b 3} {c 0}]" {
		t.Errorf("NetDeltas = %v", d)
	}
}

func Example() {
	book := ledger.NewBook()
	// Fund alice from platform revenue, then she buys from bob.
	book.Post(ledger.Posting{ID: "fund-alice", Legs: []ledger.Leg{
		ledger.Credit(ledger.Spendable("alice"), 100), ledger.Debit(ledger.Revenue, 100)}})
	book.Post(ledger.Posting{ID: "buy-1", Legs: []ledger.Leg{
		ledger.Debit(ledger.Spendable("alice"), 30), ledger.Credit(ledger.Earned("bob"), 30)}})
	_, err := book.Post(ledger.Posting{ID: "buy-2", Legs: []ledger.Leg{
		ledger.Debit(ledger.Spendable("alice"), 80), ledger.Credit(ledger.Earned("bob"), 80)}})
	fmt.Println(book.Balance(ledger.Spendable("alice")), book.Balance(ledger.Earned("bob")), book.Balance(ledger.Revenue))
	fmt.Println(errcode.Of(err))
	// Output:
	// 70 30 -100
	// LEDGER.OVERDRAFT
}

// Legs that balance overall but whose sum on one account leaves int64 are
// refused: two credits of MaxInt64 to w (each paired with a debit of
// platform:p, so the running sum never overflows) netted to a delta of −2,
// and a Book, the stores and the reservations all applied it as a debit of
// 2 — a movement meant as a credit took money from the wallet.
func TestValidateAccountNetOverflow(t *testing.T) {
	legs := []ledger.Leg{ledger.Credit("w", math.MaxInt64), ledger.Debit("platform:p", math.MaxInt64), ledger.Credit("w", math.MaxInt64), ledger.Debit("platform:p", math.MaxInt64)}
	err := ledger.ValidateLegs(legs)
	var me *ledger.MalformedError
	if !errors.As(err, &me) || me.Index != 2 {
		t.Fatalf("ValidateLegs = %v (net deltas %v); want a MalformedError at leg 2", err, ledger.NetDeltas(legs))
	}
	// The same past 16 legs (the map path).
	long := []ledger.Leg{}
	for i := range 8 {
		a := fmt.Sprintf("u%d", i)
		long = append(long, ledger.Credit(a, 1), ledger.Debit("platform:q", 1))
	}
	long = append(long, legs...)
	if err := ledger.ValidateLegs(long); !errors.As(err, &me) || me.Index != 18 {
		t.Fatalf("ValidateLegs of %d legs = %v; want a MalformedError at leg 18", len(long), err)
	}
	// At the edge it fits: MaxInt64 in two legs.
	if err := ledger.ValidateLegs([]ledger.Leg{ledger.Credit("w", math.MaxInt64-1), ledger.Credit("w", 1), ledger.Debit("platform:p", math.MaxInt64)}); err != nil {
		t.Errorf("a net of exactly MaxInt64 refused: %v", err)
	}
}
