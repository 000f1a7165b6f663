"""``trawl simulate``: a policy run against simulated sources on a throwaway database."""
