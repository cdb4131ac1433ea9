mod contracts;
