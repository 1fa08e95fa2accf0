package sqlstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shardwise/shardwise/ledger"
)

// Journal legs are stored as a JSON array of [account, amount] pairs, for
// example [["alice:spendable",-250],["bob:earned",250]]: readable in a SQL
// shell, and the same text on both engines. The column is outside input as
// far as this package is concerned (an operator, a restore or a bug may have
// written it), so decodeLegs checks the shape and FuzzDecodeLegs fuzzes it.

// encodeLegs writes legs in exactly the bytes encoding/json gives the
// [account, amount] pairs, by hand: it runs for every journal row of every
// group commit, where reflection cost more than the rest of the encoding.
// An account with a byte json.Marshal would escape is marshalled by it.
func encodeLegs(legs []ledger.Leg) (string, error) {
	b := make([]byte, 0, 2+len(legs)*32)
	b = append(b, '[')
	for i, l := range legs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		if plainJSONString(l.Account) {
			b = append(b, '"')
			b = append(b, l.Account...)
			b = append(b, '"')
		} else {
			q, err := json.Marshal(l.Account)
			if err != nil {
				return "", fmt.Errorf("sqlstore: encode legs: %w", err)
			}
			b = append(b, q...)
		}
		b = append(b, ',')
		b = strconv.AppendInt(b, l.Amount, 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b), nil
}

// plainJSONString reports whether json.Marshal writes s as itself in
// quotes: printable ASCII without the quote, the backslash, or the
// characters it escapes for HTML (<, >, &).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// decodeLegs parses what encodeLegs wrote: a JSON array of [string,
// integer] pairs, whitespace allowed where JSON allows it. It refuses
// anything else — trailing data, a pair that is not exactly [string,
// integer], an empty account, an amount that is not a JSON integer or does
// not fit in int64 — with ErrLegsMalformed. It does not apply the ledger's
// rules (nonzero, balanced): the session verifies those, and the hash chain
// verifies the content. It is hand-written because reading journals back is
// the hot path of every settle; strings with escapes, control bytes or
// invalid UTF-8 go through encoding/json so both agree on their value.
func decodeLegs(s string) ([]ledger.Leg, error) {
	p := legParser{s: s}
	p.space()
	if !p.eat('[') {
		return nil, ErrLegsMalformed.Wrap("not an array")
	}
	legs := make([]ledger.Leg, 0, strings.Count(s, "[")-1)
	p.space()
	if !p.eat(']') {
		for {
			p.space()
			if !p.eat('[') {
				return nil, ErrLegsMalformed.Wrap("leg %d is not an [account, amount] pair", len(legs))
			}
			p.space()
			account, err := p.str()
			if err != nil || account == "" {
				return nil, ErrLegsMalformed.Wrap("leg %d account", len(legs))
			}
			p.space()
			if !p.eat(',') {
				return nil, ErrLegsMalformed.Wrap("leg %d is not an [account, amount] pair", len(legs))
			}
			p.space()
			amount, err := p.integer()
			if err != nil {
				return nil, ErrLegsMalformed.Wrap("leg %d amount: %v", len(legs), err)
			}
			p.space()
			if !p.eat(']') {
				return nil, ErrLegsMalformed.Wrap("leg %d is not an [account, amount] pair", len(legs))
			}
			legs = append(legs, ledger.Leg{Account: account, Amount: amount})
			p.space()
			if p.eat(']') {
				break
			}
			if !p.eat(',') {
				return nil, ErrLegsMalformed.Wrap("after leg %d: want ',' or ']'", len(legs)-1)
			}
		}
	}
	p.space()
	if p.i != len(s) {
		return nil, ErrLegsMalformed.Wrap("trailing data")
	}
	return legs, nil
}

type legParser struct {
	s string
	i int
}

// space skips JSON whitespace.
func (p *legParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *legParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

var errNotString = errors.New("not a string")

// str reads a JSON string.
func (p *legParser) str() (string, error) {
	if !p.eat('"') {
		return "", errNotString
	}
	start := p.i
	plain := true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\':
			plain = false
			p.i += 2 // the escaped byte cannot end the string
			continue
		case c == '"':
			tok := p.s[start-1 : p.i+1]
			p.i++
			if plain && utf8.ValidString(tok) {
				return tok[1 : len(tok)-1], nil
			}
			var v string
			if err := json.Unmarshal([]byte(tok), &v); err != nil {
				return "", err
			}
			return v, nil
		case c < 0x20:
			plain = false
		}
		p.i++
	}
	return "", errNotString
}

var errNotInteger = errors.New("not a JSON integer")

// integer reads a JSON number that is an integer in int64.
func (p *legParser) integer() (int64, error) {
	start := p.i
	p.eat('-')
	switch {
	case p.eat('0'):
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
	default:
		return 0, errNotInteger
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return 0, errNotInteger
		}
	}
	return strconv.ParseInt(p.s[start:p.i], 10, 64)
}
