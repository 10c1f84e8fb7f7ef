// The campaign status table of the interface spec ("States and transitions"), written out independently of
// src/campaigns/status.ts so the tests check the implementation against the spec, not against itself.
export const SPEC_MOVES: [from: string, to: string][] = [
  ['draft', 'scheduled'],
  ['draft', 'running'],
  ['scheduled', 'running'],
  ['scheduled', 'cancelled'],
  ['running', 'paused'],
  ['running', 'cancelled'],
  ['paused', 'running'],
  ['paused', 'cancelled'],
]
