"""The nightly utilisation report (DESIGN R-Q5, R-Q7): ``railgang report``, the daemon's nightly
job and ``/v1/reports/{date}``. ``data`` reads the ledger, ``build`` computes the report (pure),
``render`` writes HTML/CSV/JSON, ``detectors`` finds the anomalies. docs/report.md."""
