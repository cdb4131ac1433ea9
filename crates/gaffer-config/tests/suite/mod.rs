mod intake;
mod load;
mod schedules;
