package patient_test

// The identifier domains of the tests: the master patient index's, and one per member.
const (
	mpi     = "urn:oid:1.3.6.1.4.1.21367.13.20.9000"
	domainA = "urn:oid:1.3.6.1.4.1.21367.13.20.1000"
	domainB = "urn:oid:1.3.6.1.4.1.21367.13.20.2000"
	domainC = "urn:oid:1.3.6.1.4.1.21367.13.20.3000"
)

var memberDomains = map[string]string{"a": domainA, "b": domainB, "c": domainC}

// memberCommunities are the members' XCPD homeCommunityIds, as HL7v3 writes them.
var memberCommunities = map[string]string{"a": "1.3.6.1.4.1.21367.13.70.1", "b": "1.3.6.1.4.1.21367.13.70.2", "c": "1.3.6.1.4.1.21367.13.70.3"}
