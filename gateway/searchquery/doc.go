// Package searchquery is a federated search as a client asks it and continues it:
// the query's parameters read and bounded (Parse), the _sort keys the gateway can
// merge on and the values they compare (SortKeys, CompareValues), and the
// continuation token of a next link, signed with the page token key (Key). It asks no
// member and knows the registry only as the ids a token may name
// (docs/data-plane.md).
package searchquery
