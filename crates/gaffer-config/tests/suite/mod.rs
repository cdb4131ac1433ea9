mod load;
mod schedules;
