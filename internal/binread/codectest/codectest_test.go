package codectest

import (
	"reflect"
	"testing"
)

// TestEmptyNonNil: the first empty non-nil slice is named by its path,
// however deep, through slices, structs and interfaces; nil slices and
// values of types that hold none pass.
func TestEmptyNonNil(t *testing.T) {
	type inner struct {
		N    int
		Data []byte
	}
	type outer struct {
		Name  string
		List  []inner
		Any   any
		Pairs [][]uint32
	}
	cases := []struct {
		v    any
		want string
	}{
		{outer{}, ""},
		{outer{List: []inner{{N: 1}, {Data: []byte{1}}}}, ""},
		{outer{List: []inner{}}, "m.List"},
		{outer{List: []inner{{N: 1}, {Data: []byte{}}}}, "m.List[].Data"},
		{outer{Any: inner{Data: []byte{}}}, "m.Any.Data"},
		{outer{Pairs: [][]uint32{{1}, {}}}, "m.Pairs[]"},
		{[]byte{}, "m"},
		{[]byte{0, 1, 2}, ""},
		{[]int64{5}, ""},
	}
	for _, tc := range cases {
		if got := EmptyNonNil(reflect.ValueOf(tc.v), "m"); got != tc.want {
			t.Errorf("EmptyNonNil(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
