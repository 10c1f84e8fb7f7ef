/**
 * Options for the tests of a file whose checks do not depend on which stores run (the HTTP layer's own
 * documents and pages; starts on the embedded defaults, which clear the servers' variables): skipped in
 * the servers run (DATABASE_URL set), which would repeat them exactly. Start no harness when `skip` is set.
 */
export const embeddedRunOnly: { skip?: string } = process.env.DATABASE_URL ? { skip: 'does not depend on the stores: checked by the embedded run' } : {}
