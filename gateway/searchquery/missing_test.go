package searchquery

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// memberSort sorts rows as a member would: by keys, a missing value first on key k
// when first[k], else last; equal rows keep their order.
func memberSort(keys []SortKey, rows [][]SortValue, first []bool) {
	slices.SortStableFunc(rows, func(a, b []SortValue) int {
		for k, key := range keys {
			x, y := a[k], b[k]
			switch {
			case !x.ok && !y.ok:
				continue
			case !x.ok || !y.ok:
				if !x.ok == first[k] {
					return -1
				}
				return 1
			}
			if c := CompareValues([]SortKey{key}, []SortValue{x}, []SortValue{y}); c != 0 {
				return c
			}
		}
		return 0
	})
}

// drive serves a member's stream (rows in the member's order) through an Order, as the
// gateway does: one mark per row (its index), the Order read back from its token form
// every `every` rows served or passed over. It returns the rows in the order served and
// the Order at the end.
func drive(t *testing.T, keys []SortKey, rows [][]SortValue, every int) ([][]SortValue, Order) {
	t.Helper()
	k := Key("0123456789abcdef0123456789abcdef")
	var o Order
	var out [][]SortValue
	i, steps := 0, 0
	for guard := 0; guard < 100*len(rows)+10; guard++ {
		if every > 0 && steps%every == 0 {
			b, _ := json.Marshal(o.Saved())
			o = Order{}
			if string(b) != "null" {
				if err := json.Unmarshal(b, &o); err != nil || !o.valid(len(keys)) {
					t.Fatalf("token form %s: %v", b, err)
				}
			}
		}
		steps++
		var st Step
		if i == len(rows) {
			st = Step{Action: Jump, To: o.End()}
		} else {
			st = o.Next(keys, rows[i], Mark{Cursor: "/s", Offset: i}, k.Group)
		}
		switch st.Action {
		case Serve:
			out = append(out, rows[i])
			i++
		case Drop:
			i++
		case Jump:
			if st.To == nil {
				return out, o
			}
			i = st.To.Offset
		}
	}
	t.Fatalf("the stream of %d rows never ended", len(rows))
	return nil, o
}

func val(s string) SortValue {
	if s == "" {
		return SortValue{}
	}
	return SortValue{text: s, ok: true}
}

func rowsOf(cells ...string) [][]SortValue {
	var out [][]SortValue
	for _, c := range cells {
		var r []SortValue
		for i := 0; i < len(c); i++ {
			if c[i] == '.' {
				r = append(r, SortValue{})
			} else {
				r = append(r, val(string(c[i])))
			}
		}
		out = append(out, r)
	}
	return out
}

func show(rows [][]SortValue) string {
	s := ""
	for _, r := range rows {
		for _, v := range r {
			if !v.ok {
				s += "."
			} else {
				s += v.text
			}
		}
		s += " "
	}
	return s
}

func TestAnOrderServesAMembersStreamInTheGatewaysOrder(t *testing.T) {
	asc := func(n string) SortKey { return SortKey{name: n} }
	desc := func(n string) SortKey { return SortKey{name: n, desc: true} }
	for _, c := range []struct {
		name  string
		keys  []SortKey
		rows  string // space-separated rows, one character per key, "." missing
		first []bool
		// want is the gateway's order; seen the placements learned.
		want, seen string
	}{
		{"descending, missing first (PostgreSQL)", []SortKey{desc("a")}, ". . c b a", []bool{true}, "c b a . . ", "F"},
		{"descending, missing last", []SortKey{desc("a")}, "c b a . .", []bool{false}, "c b a . . ", "L"},
		{"ascending, missing first", []SortKey{asc("a")}, ". a b", []bool{true}, "a b . ", "F"},
		{"ascending, missing last", []SortKey{asc("a")}, "a b .", []bool{false}, "a b . ", "L"},
		{"no value missing", []SortKey{asc("a")}, "a b c", []bool{true}, "a b c ", ""},
		{"every value missing", []SortKey{asc("a")}, ". . .", []bool{true}, ". . . ", ""},
		{"second key missing first in each group", []SortKey{asc("a"), desc("b")},
			"a. ay ax b. b. bz c. cy", []bool{false, true}, "ay ax a. bz b. b. cy c. ", "?F"},
		{"second key missing last in each group", []SortKey{asc("a"), desc("b")},
			"ay ax a. bz b. b. c.", []bool{false, false}, "ay ax a. bz b. b. c. ", "?L"},
		{"both keys missing first", []SortKey{desc("a"), desc("b")},
			".. .y .x b. bz a. ay", []bool{true, true}, "bz b. ay a. .y .x .. ", "FF"},
		{"first key missing last, second first", []SortKey{asc("a"), asc("b")},
			"a. ax b. by .. .x", []bool{false, true}, "ax a. by b. .x .. ", "?F"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := rowsOf(splitRows(c.rows)...)
			for _, every := range []int{0, 1, 2, 3} {
				got, o := drive(t, c.keys, rows, every)
				if show(got) != c.want {
					t.Fatalf("every %d: served %q, want %q", every, show(got), c.want)
				}
				if every == 0 && o.Seen != c.seen {
					t.Fatalf("learned %q, want %q", o.Seen, c.seen)
				}
				if len(o.Frames) != 0 {
					t.Fatalf("frames left: %+v", o.Frames)
				}
			}
		})
	}
}

func splitRows(s string) []string {
	var out []string
	cur := ""
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			out = append(out, cur)
			cur = ""
			continue
		}
		cur += string(s[i])
	}
	return append(out, cur)
}

// The gateway's order of any member's stream, whatever it does with missing values,
// is the stream sorted by CompareValues: checked on random streams of two and three
// keys.
func TestAnOrderOfRandomStreamsIsTheGatewaysOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	names := []string{"_id", "family", "given"}
	for n := range 400 {
		nk := 1 + r.IntN(3)
		keys := make([]SortKey, nk)
		first := make([]bool, nk)
		for k := range keys {
			keys[k] = SortKey{name: names[k], desc: r.IntN(2) == 0}
			first[k] = r.IntN(2) == 0
		}
		rows := make([][]SortValue, r.IntN(30))
		for i := range rows {
			rows[i] = make([]SortValue, nk)
			for k := range rows[i] {
				if x := r.IntN(4); x > 0 {
					rows[i][k] = val(string(rune('a' + x)))
				}
			}
		}
		memberSort(keys, rows, first)
		want := slices.Clone(rows)
		slices.SortStableFunc(want, func(a, b []SortValue) int { return CompareValues(keys, a, b) })
		got, _ := drive(t, keys, rows, 1+r.IntN(4))
		if show(got) != show(want) {
			t.Fatalf("case %d, keys %v, first %v:\nstream %s\nserved %s\nwant   %s", n, keys, first, show(rows), show(got), show(want))
		}
	}
}

func TestAGroupHashTellsEqualValuesAndNothingElse(t *testing.T) {
	k := Key("0123456789abcdef0123456789abcdef")
	a := SortValues(json.RawMessage(`{"birthDate":"1980-02-03","name":[{"family":"Smith"}]}`), []SortKey{{name: "family"}, {name: "birthdate"}})
	b := SortValues(json.RawMessage(`{"birthDate":"1980-02-03T00:00:00Z","name":[{"family":"SMITH"}]}`), []SortKey{{name: "family"}, {name: "birthdate"}})
	c := SortValues(json.RawMessage(`{"name":[{"family":"Smith"}]}`), []SortKey{{name: "family"}, {name: "birthdate"}})
	if k.Group(a) != k.Group(b) || k.Group(a) == k.Group(c) || k.Group(a[:1]) != k.Group(c[:1]) {
		t.Fatal("equal values hash apart, or different ones together")
	}
	if g := k.Group(a); fmt.Sprint(len(g)) != "16" || Key("another key, 32 bytes long.....").Group(a) == g {
		t.Fatalf("group %q", g)
	}
}

func TestATokenRefusesAnOrderThatDoesNotFitItsSort(t *testing.T) {
	k := Key("0123456789abcdef0123456789abcdef")
	base := Token{Type: "Patient", Count: 10, Sort: "-birthdate", Caller: "c", Expires: 1}
	known := func(string) bool { return true }
	for name, c := range map[string]struct {
		ord *Order
		ok  bool
	}{
		"a held block":               {&Order{Seen: "F", Frames: []Frame{{Level: 0, Group: "g", Start: Mark{Cursor: "/Patient?x=1", Offset: 3}}}}, true},
		"a level past the keys":      {&Order{Frames: []Frame{{Level: 1, Group: "g", Start: Mark{Cursor: "/Patient"}}}}, false},
		"a start outside the base":   {&Order{Frames: []Frame{{Level: 0, Group: "g", Start: Mark{Cursor: "//evil/x"}}}}, false},
		"a resume outside the base":  {&Order{Frames: []Frame{{Level: 0, Group: "g", Start: Mark{Cursor: "/P"}, Replay: true, Resume: &Mark{Cursor: "http://x/"}}}}, false},
		"a placement of no key":      {&Order{Seen: "FF"}, false},
		"a placement that is no one": {&Order{Seen: "x"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			tt := base
			tt.Members = []TokenMember{{ID: "a", Cursor: "/Patient", Order: c.ord}}
			tok, err := k.Encode(tt)
			if err != nil {
				t.Fatal(err)
			}
			_, err = k.Decode(tok, 1, known, 100)
			if (err == nil) != c.ok {
				t.Fatalf("decode: %v, want ok %v", err, c.ok)
			}
		})
	}
}

func TestFirstIsTheHeadThatComesFirst(t *testing.T) {
	keys := []SortKey{{name: "family", desc: true}}
	heads := [][]SortValue{nil, {val("b")}, {{}}, {val("c")}, {val("c")}}
	head := func(i int) ([]SortValue, bool) { return heads[i], heads[i] != nil }
	if got := First(keys, len(heads), head); got != 3 {
		t.Fatalf("first %d, want 3 (c, descending, the first of two)", got)
	}
	if got := First(nil, len(heads), head); got != 1 {
		t.Fatalf("unsorted: first %d, want 1", got)
	}
	if got := First(keys, 1, head); got != -1 {
		t.Fatalf("no head: %d", got)
	}
}
