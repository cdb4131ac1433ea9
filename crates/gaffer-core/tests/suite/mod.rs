mod dependencies;
mod follow_ups;
mod messages;
mod reducer;
mod reducer_props;
