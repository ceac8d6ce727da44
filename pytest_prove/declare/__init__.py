"""What a user declares: the rollout's spec (conditions, events, outcomes), the Episode it
returns, the seeds each replicate is given, and the token prices. Imports nothing else of the
package but :mod:`pytest_prove.errors`."""
