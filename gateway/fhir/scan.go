package fhir

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ScanPage reads a member's searchset page as DecodePage does, without decoding it
// into structs: the body is checked to be JSON once, then its top-level keys and its
// entries' keys are walked, each entry's resource kept as a slice of the body.
// Decoding every page whole (every resource copied, every value visited by
// reflection) was most of the gateway's own cost of a federated page. A key written
// with an escape sends the page to DecodePage, which reads such keys.
//
// A page of more than maxEntries entries is refused (ErrTooManyEntries) as soon as the
// one past it is seen: an answer of millions of `{}` is a few MiB of body, but every
// entry kept would cost far more than its three bytes.
func ScanPage(body []byte, maxEntries int) (*Page, error) {
	if !json.Valid(body) {
		return nil, errors.New("the member's answer is not JSON")
	}
	var resourceType, bundleType string
	var pg Page
	var links []byte
	err := eachKey(body, func(key []byte, v []byte) error {
		var err error
		switch string(key) {
		case "resourceType":
			resourceType, err = stringValue(v)
		case "type":
			bundleType, err = stringValue(v)
		case "total":
			pg.Total, err = intValue(v)
		case "link":
			links = v
		case "entry":
			pg.Entry, err = scanEntries(v, maxEntries)
		}
		return err
	})
	if errors.Is(err, errEscapedKey) {
		return DecodePage(body, maxEntries)
	}
	if err != nil {
		return nil, err
	}
	if resourceType != "Bundle" || bundleType != "searchset" || (pg.Total != nil && *pg.Total < 0) {
		return nil, ErrNotASearchset
	}
	if links != nil && !bytes.Equal(links, []byte("null")) {
		var ls []Link
		if err := json.Unmarshal(links, &ls); err != nil {
			return nil, err
		}
		for _, l := range ls {
			switch l.Relation {
			case "next":
				pg.Next = l.URL
			case "self":
				pg.Self = l.URL
			}
		}
	}
	return &pg, nil
}

// countElements is how many elements the array at v[0] (valid JSON) holds, counting
// no further than limit+1.
func countElements(v []byte, limit int) int {
	n := 0
	_ = eachElement(v, func([]byte) error {
		if n++; n > limit {
			return ErrTooManyEntries
		}
		return nil
	})
	return n
}

func scanEntries(v []byte, maxEntries int) ([]Entry, error) {
	if bytes.Equal(v, []byte("null")) {
		return nil, nil
	}
	if v[0] != '[' {
		return nil, errors.New("the Bundle.entry is not an array")
	}
	// Counted before anything is kept: the slice is then made once, of its size.
	n := countElements(v, maxEntries)
	if n > maxEntries {
		return nil, ErrTooManyEntries
	}
	out := make([]Entry, 0, n)
	err := eachElement(v, func(el []byte) error {
		if el[0] != '{' {
			if bytes.Equal(el, []byte("null")) {
				out = append(out, Entry{})
				return nil
			}
			return errors.New("a Bundle.entry is not an object")
		}
		var e Entry
		err := eachKey(el, func(key []byte, v []byte) error {
			switch string(key) {
			case "resource":
				e.Resource = v // null too, as a json.RawMessage keeps it
			case "search":
				if bytes.Equal(v, []byte("null")) {
					e.Search = nil
					return nil
				}
				if v[0] != '{' {
					return errors.New("a Bundle.entry.search is not an object")
				}
				e.Search = new(EntrySearch)
				return eachKey(v, func(key []byte, v []byte) error {
					var err error
					switch string(key) {
					case "mode":
						e.Search.Mode, err = stringValue(v)
					case "score":
						e.Search.Score = v // any JSON, as a json.RawMessage takes it
					}
					return err
				})
			}
			return nil
		})
		out = append(out, e)
		return err
	})
	return out, err
}

var errEscapedKey = errors.New("a key is written with an escape")

// eachKey calls fn with each key of the object at the start of b (valid JSON) and
// the raw bytes of its value.
func eachKey(b []byte, fn func(key []byte, value []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New("not a JSON object")
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return errors.New("unexpected end of JSON")
		}
		switch b[i] {
		case '}':
			return nil
		case ',':
			i++
			continue
		}
		key, next, plain := readString(b, i)
		if next < 0 {
			return errors.New("unexpected end of JSON")
		}
		if !plain {
			return errEscapedKey
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return errors.New("malformed JSON object")
		}
		i = skipSpace(b, i+1)
		end := skipValue(b, i)
		if end < 0 {
			return errors.New("unexpected end of JSON")
		}
		if err := fn(key, b[i:end]); err != nil {
			return err
		}
		i = end
	}
}

// eachElement calls fn with the raw bytes of each element of the array at b[0].
func eachElement(b []byte, fn func(el []byte) error) error {
	i := 1
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return errors.New("unexpected end of JSON")
		}
		switch b[i] {
		case ']':
			return nil
		case ',':
			i++
			continue
		}
		end := skipValue(b, i)
		if end < 0 {
			return errors.New("unexpected end of JSON")
		}
		if err := fn(b[i:end]); err != nil {
			return err
		}
		i = end
	}
}

// stringValue reads a JSON string value (null is "", as encoding/json reads it).
func stringValue(v []byte) (string, error) {
	if bytes.Equal(v, []byte("null")) {
		return "", nil
	}
	if s, _, plain := readString(v, 0); plain && len(v) > 0 && v[0] == '"' {
		return string(s), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// intValue reads a JSON integer (null is none, as encoding/json reads it).
func intValue(v []byte) (*int, error) {
	if bytes.Equal(v, []byte("null")) {
		return nil, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		var x int
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, err
		}
		n = x
	}
	return &n, nil
}
