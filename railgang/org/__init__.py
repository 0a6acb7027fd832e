"""The organisation tree's pure rules, shared by the decision core, the database and the API."""
