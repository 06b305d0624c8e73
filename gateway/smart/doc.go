// Package smart is the logic of SMART on FHIR authorization on the data plane:
// what a token's scopes allow, and which patient a search names. It is pure: no
// HTTP, no gin, no configuration, no other ferrofed package. The middleware that
// reads a token, calls it and writes the 403 is built on it later.
//
// # Scopes
//
// Parse reads a token's scopes (the []string auth.Scopes returns) as the SMART App
// Launch 2.x specification defines them, on its page "Scopes and Launch Context"
// (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html):
//
//   - v2: context/Type.perms[?param=value&...], context one of patient, user and
//     system, Type a resource type or *, perms a non-empty subset of c r u d s
//     written in that order, each letter at most once (rs, cud, cruds). Anything else
//     (rc, rr, dus, an empty suffix) is ignored, as the specification allows.
//   - v1: context/Type.read, .write or .*, read as v2's .rs, .cud and .cruds, as the
//     specification says.
//
// Every other scope (openid, fhirUser, launch, launch/patient, offline_access,
// online_access, the operator's scopes, a malformed resource scope) grants no
// resource and is kept, in order, for the audit trail (Grants.Other). Parse reads at
// most MaxScopes (256) scopes of at most MaxScopeLen (512) bytes each, and counts the
// rest (Grants.Dropped): they grant nothing.
//
// A scope's query (patient/Observation.rs?category=laboratory) restricts its grant
// to requests and results that match it. A restriction is read as a URL query is
// and compared exactly (QueryMatches); one that cannot be read (an item without a
// key or a value, a bad escape) makes the scope grant nothing, never everything.
//
// # Interactions
//
// Each interaction needs permissions on its resource type (Required), as the
// specification's table says: r for read, vread and an instance's history; s for a
// search and for a type's or the system's history; c for create; u for update and
// patch (an update that creates included); d for delete. The specification says
// nothing of the conditional interactions; here each also needs s, as each runs a
// search on the client's criteria and its answer tells what that search found: a
// conditional create needs cs, a conditional update or patch us, a conditional
// delete ds. The capability statement is always allowed. A transaction or batch has
// no scope of its own (the specification: its requests are checked one by one):
// ParseEntry classifies each entry, FirstRefusal finds the first one refused, and
// Allow refuses the wrapper itself.
//
// # Decisions
//
// Grants.Allow decides an interaction on a type over every level the token holds,
// broadest first (AllowAt, at one level), and says at which level it was allowed: at
// the patient level the caller must confine the request to the compartment of the
// token's patient claim.
// Permissions add up across the scopes of one level (Observation.r with
// Observation.s is Observation.rs), never across levels, and * covers every type.
// A decision that rests on restricted scopes carries their queries (Restrictions);
// AllowSearch decides a search (or a conditional interaction's criteria) on its
// parameters instead, letting only the restricted scopes they satisfy apply. A
// refusal names the scope that would have allowed the interaction, in canonical v2
// form (patient/Observation.s), for the OperationOutcome. What a restriction cannot
// see is the caller's: the resources a search's _include or _revinclude adds, and the
// result of a read under a restricted grant.
//
// # The patient compartment
//
// A patient-level grant reaches only the patient's compartment, as FHIR R4 defines
// it in its CompartmentDefinition "patient"
// (https://hl7.org/fhir/R4/compartmentdefinition-patient.json): the resource types
// that can be in it and the search parameters that put them there
// (CompartmentParams, InCompartment, all 66 types with parameters of R4 4.0.1).
// PatientsNamed reads which patients a search names through those parameters, so
// that the middleware can add the token's patient to a search that names none and
// refuse one that names another.
package smart
