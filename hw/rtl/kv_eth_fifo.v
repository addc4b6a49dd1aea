/*

pynq-kv: small synchronous FIFO of the Ethernet front-end

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Synchronous first-word-fall-through FIFO (docs/frontend_rtl.md)
 *
 * One push and one pop per cycle, full throughput.  The head entry is read
 * asynchronously from the memory (m_data is valid whenever m_valid is high),
 * so small and medium FIFOs map to distributed RAM (LUTRAM).  s_ready is
 * !full, m_valid is !empty; neither depends combinationally on the other
 * side.  `count` is the number of entries held.
 */
module kv_eth_fifo #
(
    // Width of an entry in bits: 1 or more
    parameter WIDTH = 8,
    // Number of entries: a power of two from 2 to 65536
    parameter DEPTH = 4
)
(
    input  wire                     clk,
    input  wire                     rst,

    input  wire [WIDTH-1:0]         s_data,
    input  wire                     s_valid,
    output wire                     s_ready,

    output wire [WIDTH-1:0]         m_data,
    output wire                     m_valid,
    input  wire                     m_ready,

    output wire [$clog2(DEPTH):0]   count
);

localparam AW = $clog2(DEPTH);

// check configuration
initial begin
    if (WIDTH < 1) begin
        $error("Error: WIDTH must be at least 1 (instance %m)");
        $finish;
    end
    if (DEPTH < 2 || DEPTH > 65536 || (DEPTH & (DEPTH - 1)) != 0) begin
        $error("Error: DEPTH must be a power of two from 2 to 65536 (instance %m)");
        $finish;
    end
end

reg [WIDTH-1:0] mem [0:DEPTH-1];
reg [AW:0] wr_ptr;
reg [AW:0] rd_ptr;

wire full = (wr_ptr[AW-1:0] == rd_ptr[AW-1:0]) && (wr_ptr[AW] != rd_ptr[AW]);
wire empty = wr_ptr == rd_ptr;

assign s_ready = !full;
assign m_valid = !empty;
assign m_data = mem[rd_ptr[AW-1:0]];
assign count = wr_ptr - rd_ptr;

always @(posedge clk) begin
    if (s_valid && !full) begin
        mem[wr_ptr[AW-1:0]] <= s_data;
    end
end

always @(posedge clk) begin
    if (rst) begin
        wr_ptr <= {AW+1{1'b0}};
        rd_ptr <= {AW+1{1'b0}};
    end else begin
        if (s_valid && !full) begin
            wr_ptr <= wr_ptr + 1'b1;
        end
        if (m_ready && !empty) begin
            rd_ptr <= rd_ptr + 1'b1;
        end
    end
end

endmodule

`resetall
