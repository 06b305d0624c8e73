package smart

import (
	"net/url"
	"slices"
)

// Decision is what a token's grants say of one interaction.
type Decision struct {
	// Allowed reports whether some grant allows the interaction.
	Allowed bool
	// Level is the level of the grants that allowed it (zero when refused, and for
	// Capabilities, which needs none). At LevelPatient the caller must confine the
	// request to the compartment of the token's patient claim; at LevelUser and
	// LevelSystem the gateway adds nothing, the upstream's own policy applies.
	Level Level
	// Restrictions, when not empty, are the queries of the restricted scopes the
	// decision rests on: the interaction is allowed only for a request (or, for a
	// read, a result) that matches at least one of them (QueryMatches). Empty means
	// no restriction.
	Restrictions []url.Values
	// Needed, when refused, is the scope that would have allowed the interaction in
	// canonical v2 form (patient/Observation.s, system/*.s), for the 403's
	// OperationOutcome. It is empty when no scope could: an unknown interaction, a
	// transaction's wrapper, a malformed resource type.
	Needed string
	// Reason, when refused, says why in plain English.
	Reason string
}

// Satisfied reports whether the decision allows a request with these search
// parameters: allowed, and either unrestricted or matching one of its restrictions.
func (d Decision) Satisfied(params url.Values) bool {
	if !d.Allowed {
		return false
	}
	if len(d.Restrictions) == 0 {
		return true
	}
	return slices.ContainsFunc(d.Restrictions, func(r url.Values) bool { return QueryMatches(r, params) })
}

// QueryMatches reports whether a request's search parameters satisfy a scope's
// restriction: every restriction parameter is present in params, under the same
// name (modifiers included), with the same value among the request's values. A
// request's repeated parameter narrows its search (FHIR ANDs them), so one equal
// value is enough; a comma list (an OR) is compared whole and so never matches a
// single value. The comparison is exact: `category=laboratory` does not satisfy
// `category=http://terminology.hl7.org/CodeSystem/observation-category|laboratory`.
// An empty restriction is always satisfied.
func QueryMatches(restriction, params url.Values) bool {
	for key, want := range restriction {
		have := params[key]
		for _, v := range want {
			if !slices.Contains(have, v) {
				return false
			}
		}
	}
	return true
}

// Allow decides an interaction on a resource type ("" for the system-level
// HistorySystem and SearchSystem) over every level the token holds. The levels are
// tried broadest first, system, user, patient, and an unrestricted grant at any level
// is preferred to a restricted one; the decision is one level's, so restricted
// grants of two levels are not offered together. Permissions add up across the grants of one
// level (Observation.r and Observation.s allow what Observation.rs allows), never
// across levels. When refused, Needed names the scope at the narrowest level the
// token holds (user when it holds none); AllowAt names a level of the caller's choice.
func (g Grants) Allow(resourceType string, i Interaction) Decision {
	return g.decide(levels, resourceType, i, nil, false)
}

// AllowAt decides an interaction as Allow does, considering only the grants of one
// level, and names that level when refused. A level that is none of the three
// refuses everything but Capabilities.
func (g Grants) AllowAt(level Level, resourceType string, i Interaction) Decision {
	if level.String() == "" && i != Capabilities {
		return Decision{Reason: "unknown level"}
	}
	return g.decide([]Level{level}, resourceType, i, nil, false)
}

// AllowSearch decides an interaction that carries search parameters (a search, or
// the criteria of a conditional interaction): a restricted grant counts only when
// params satisfy its restriction (QueryMatches), and then as if unrestricted; one they
// do not satisfy does not apply. The decision it returns has no Restrictions.
func (g Grants) AllowSearch(resourceType string, i Interaction, params url.Values) Decision {
	return g.decide(levels, resourceType, i, params, true)
}

// covers reports whether the grant names resourceType: the same type, or "*". A
// request with no type (a system-level search) is covered by "*" only.
func (g Grant) covers(resourceType string) bool {
	return g.Type == "*" || (resourceType != "" && g.Type == resourceType)
}

// decide checks the request's form, then tries each level for an unrestricted
// decision and, failing that (and without params), for a restricted one.
func (g Grants) decide(at []Level, resourceType string, i Interaction, params url.Values, withParams bool) Decision {
	if i == Capabilities {
		return Decision{Allowed: true}
	}
	need, refusal, ok := g.check(resourceType, i)
	if !ok {
		return refusal
	}
	for _, l := range at {
		if g.free(l, resourceType, params, withParams).Has(need) {
			return Decision{Allowed: true, Level: l}
		}
	}
	if !withParams {
		for _, l := range at {
			missing := need &^ g.free(l, resourceType, nil, false)
			if r := g.restricted(l, resourceType, missing); len(r) > 0 {
				return Decision{Allowed: true, Level: l, Restrictions: r}
			}
		}
	}
	level := LevelUser
	if len(at) == 1 {
		level = at[0]
	} else if held := g.Levels(); len(held) > 0 {
		level = held[0]
	}
	typ := resourceType
	if typ == "" {
		typ = "*"
	}
	return Decision{
		Needed: level.String() + "/" + typ + "." + need.String(),
		Reason: "no scope of the token grants " + i.String() + " on " + typ,
	}
}

// check returns the permissions an interaction needs, or the refusal of one that no
// scope can allow: a transaction's wrapper, an unknown interaction, a resource type
// FHIR cannot name, a type given to a system-level interaction.
func (g Grants) check(resourceType string, i Interaction) (Perm, Decision, bool) {
	need := Required(i)
	switch {
	case i == Transaction:
		return 0, Decision{Reason: "a transaction or batch is decided entry by entry"}, false
	case need == 0:
		return 0, Decision{Reason: "unknown interaction"}, false
	case i.typeless() && resourceType != "":
		return 0, Decision{Reason: i.String() + " names no resource type"}, false
	case !i.typeless() && !validType(resourceType):
		return 0, Decision{Reason: "not a FHIR resource type"}, false
	}
	return need, Decision{}, true
}

// free is the union of the permissions of the level's grants that cover the type
// and apply without a restriction: those with no query and, with params, those whose
// query params satisfy.
func (g Grants) free(l Level, resourceType string, params url.Values, withParams bool) Perm {
	var p Perm
	for _, gr := range g.grants {
		if gr.Level != l || !gr.covers(resourceType) {
			continue
		}
		if len(gr.Query) == 0 || (withParams && QueryMatches(gr.Query, params)) {
			p |= gr.Perms
		}
	}
	return p
}

// restricted returns the restrictions under which the level's restricted grants
// supply the missing permissions: grants with the same query add up (Observation.u?x
// and Observation.s?x supply us under x); grants with different queries do not (u
// under x and s under y supply us under neither, as no one restriction covers both).
func (g Grants) restricted(l Level, resourceType string, missing Perm) []url.Values {
	var keys []string
	sums := map[string]Perm{}
	queries := map[string]url.Values{}
	for _, gr := range g.grants {
		if gr.Level != l || len(gr.Query) == 0 || !gr.covers(resourceType) {
			continue
		}
		k := gr.Query.Encode()
		if _, seen := sums[k]; !seen {
			keys = append(keys, k)
			queries[k] = gr.Query
		}
		sums[k] |= gr.Perms
	}
	var out []url.Values
	for _, k := range keys {
		if sums[k].Has(missing) {
			out = append(out, cloneValues(queries[k]))
		}
	}
	return out
}
