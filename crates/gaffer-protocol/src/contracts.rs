//! The contracts agents answer in: plan, verdict, ruling.
