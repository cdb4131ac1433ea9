mod reducer;
mod reducer_props;
