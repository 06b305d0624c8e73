package searchquery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// Where a member puts missing values (docs/data-plane.md, "Missing values"). The
// gateway's merged order puts a resource without a key's value after every resource
// with one, in either direction. A member may put it first instead (PostgreSQL does on
// a descending sort), and may do so for one key and not another. The gateway learns it
// from the member's own stream and, until it knows, assumes the worst: an Order takes
// the member's matches in the member's order and says, for each, whether it comes
// next in the gateway's order, is held back, or whether the member must be asked again
// from a mark.
//
// A resource whose value of key k is missing, in a member that may put it first, opens
// a block: the matches of its group (the same values of the keys before k) without a
// value of k. The block is passed over (its start marked), the group's matches with a
// value are served, and when the group ends (or the stream does) the block is asked
// again from its start and served, then the member is asked from where the group
// ended. Blocks nest, one per key at most. A member seen to put missing values last on
// a key (a present value followed by a missing one in one group) opens no block on it.
//
// An Order travels in the continuation token. It holds marks (a member's page and an
// offset in it, as a position does) and, for a group, a keyed hash of its values
// (Key.Group): a token never carries a value of a resource.

// Mark is a place in one member's stream: its page (a cursor, as TokenMember's) and
// how many of that page's matches come before it.
type Mark struct {
	Cursor string `json:"c"`
	Offset int    `json:"o,omitempty"`
}

// Frame is one block held back.
type Frame struct {
	// Level is the key whose value the block's matches lack.
	Level int `json:"l"`
	// Group is Key.Group of the values of the keys before Level.
	Group string `json:"g"`
	// Start is the block's first match.
	Start Mark `json:"s"`
	// Replay is true once the group's matches with a value are served and the block is
	// being served; Resume is then where the member goes on after it (nil: its stream
	// ended there).
	Replay bool  `json:"r,omitempty"`
	Resume *Mark `json:"re,omitempty"`
}

// Placement of missing values, as learned of one key: unknown until seen.
const (
	placeUnknown = '?'
	placeFirst   = 'F'
	placeLast    = 'L'
)

// Order is what the gateway knows of one member's order in a sorted search.
type Order struct {
	// Seen is the placement learned for each key (placeUnknown, placeFirst,
	// placeLast), "" before any.
	Seen string `json:"p,omitempty"`
	// Frames are the blocks held back, outermost first, their levels increasing.
	Frames []Frame `json:"f,omitempty"`
	// prev is the match before the head in the member's stream, nil after a jump or
	// a page's token.
	prev []SortValue
}

// Action is what becomes of a member's head match.
type Action int

const (
	// Serve: the head is the member's next match in the gateway's order.
	Serve Action = iota
	// Drop: the head is held back in a block; pass over it.
	Drop
	// Jump: ask the member from Step.To; nil To: the member has nothing more.
	Jump
)

// Step is an Order's decision on a head.
type Step struct {
	Action Action
	To     *Mark
}

// Saved is the Order as a token carries it, nil when it holds nothing.
func (o *Order) Saved() *Order {
	if len(o.Frames) == 0 && o.Seen == "" {
		return nil
	}
	c := *o
	c.prev = nil
	return &c
}

// Placement is what was learned of key k: 'F' (missing values first), 'L' (last) or
// '?' (not yet seen).
func (o *Order) Placement(k int) byte {
	if k < len(o.Seen) {
		return o.Seen[k]
	}
	return placeUnknown
}

// Next decides the head match (values head, at mark at) of a member sorted by keys;
// group is Key.Group.
func (o *Order) Next(keys []SortKey, head []SortValue, at Mark, group func([]SortValue) string) Step {
	from := 0
	if n := len(o.Frames); n > 0 {
		f := &o.Frames[n-1]
		inGroup := group(head[:f.Level]) == f.Group
		switch {
		case f.Replay && (!inGroup || head[f.Level].ok):
			// The block is served: on from where its group ended.
			o.Frames, o.prev = o.Frames[:n-1], nil
			if f.Resume == nil {
				return Step{Action: Jump, To: o.End()}
			}
			return Step{Action: Jump, To: f.Resume}
		case !f.Replay && !inGroup:
			// The group's matches with a value are served: its block now, then here.
			r := at
			f.Replay, f.Resume, o.prev = true, &r, nil
			return Step{Action: Jump, To: &f.Start}
		case !f.Replay && !head[f.Level].ok:
			o.prev = head
			return Step{Action: Drop}
		}
		from = f.Level + 1
	}
	o.learn(len(keys), head)
	for k := from; k < len(keys); k++ {
		if head[k].ok || o.Placement(k) == placeLast {
			continue
		}
		o.Frames = append(o.Frames, Frame{Level: k, Group: group(head[:k]), Start: at})
		o.prev = head
		return Step{Action: Drop}
	}
	o.prev = head
	return Step{Action: Serve}
}

// End is where a member whose stream ended goes on: the start of the innermost block
// not yet served, the place after one that was, or nil when it has nothing more.
func (o *Order) End() *Mark {
	o.prev = nil
	for n := len(o.Frames); n > 0; n = len(o.Frames) {
		f := &o.Frames[n-1]
		if !f.Replay {
			f.Replay, f.Resume = true, nil
			return &f.Start
		}
		o.Frames = o.Frames[:n-1]
		if f.Resume != nil {
			return f.Resume
		}
	}
	return nil
}

// learn reads, from the head and the match before it, where the member puts missing
// values: at the first key whose values differ, a missing value followed by a present
// one is first, a present one followed by a missing one last.
func (o *Order) learn(n int, head []SortValue) {
	prev := o.prev
	if prev == nil {
		return
	}
	for k := range n {
		if prev[k].ok && head[k].ok && prev[k] == head[k] || !prev[k].ok && !head[k].ok {
			continue
		}
		if prev[k].ok != head[k].ok {
			seen := []byte(o.Seen)
			for len(seen) < n {
				seen = append(seen, placeUnknown)
			}
			seen[k] = placeLast
			if head[k].ok {
				seen[k] = placeFirst
			}
			o.Seen = string(seen)
		}
		return
	}
}

// valid reports whether o, read from a token, fits a sort of n keys.
func (o *Order) valid(n int) bool {
	if len(o.Seen) > n {
		return false
	}
	for i := range len(o.Seen) {
		if c := o.Seen[i]; c != placeUnknown && c != placeFirst && c != placeLast {
			return false
		}
	}
	level := -1
	for _, f := range o.Frames {
		if f.Level <= level || f.Level >= n || f.Group == "" || !validMark(f.Start) || (f.Resume != nil && !validMark(*f.Resume)) || (f.Resume != nil && !f.Replay) {
			return false
		}
		level = f.Level
	}
	return true
}

func validMark(m Mark) bool { return ValidCursor(m.Cursor) && m.Offset >= 0 && m.Offset <= maxOffset }

// groupContext binds a group's hash to its use of the key.
const groupContext = "ferrofed-sort-group-v1\x00"

// Group is the keyed hash of sort values (a group's, Frame.Group): equal values hash
// equal, and the hash tells nothing of them to whoever lacks the key.
func (k Key) Group(vals []SortValue) string {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(groupContext))
	for _, v := range vals {
		switch {
		case !v.ok:
			h.Write([]byte{0})
		case v.text != "":
			h.Write([]byte("t" + strconv.Itoa(len(v.text)) + ":" + v.text))
		default:
			h.Write([]byte("d" + strconv.FormatInt(v.at, 10) + ";"))
		}
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// Value is the Order a token carried, none for nil.
func (o *Order) Value() Order {
	if o == nil {
		return Order{}
	}
	return *o
}
